#include "ps/node/metrics.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace zps::metrics {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end())) << "histogram bounds must be sorted";
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::bucketCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> latencyBuckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3,
          0.1,   0.25,   0.5,    1,      2.5,  5,      10,   30,    60};
}

bool validName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string escapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

namespace {

std::string escapeHelp(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// {a="x",b="y"} plus an optional extra label (le for histogram buckets).
std::string labelText(const Labels& labels, const std::string& extra_name = "", const std::string& extra = "") {
  if (labels.empty() && extra_name.empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out += ",";
    first = false;
    out += k + "=\"" + escapeLabelValue(v) + "\"";
  }
  if (!extra_name.empty()) {
    if (!first) out += ",";
    out += extra_name + "=\"" + extra + "\"";
  }
  return out + "}";
}

const char* typeName(int t) {
  switch (t) {
    case 0: return "counter";
    case 1: return "gauge";
    default: return "histogram";
  }
}

}  // namespace

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", v);
    return buf;
  }
  // The shortest of %.15g and %.17g that reads back exactly, so bucket bounds print as 5e-05.
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v) std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Type type, const Labels& labels) {
  CHECK(validName(name)) << "bad metric name " << name;
  for (const auto& [k, v] : labels) CHECK(validName(k) && k.rfind("__", 0) != 0) << "bad label name " << k;
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  CHECK(it->second.type == type) << "metric " << name << " registered with two types";
  return it->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::kCounter, labels).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::kGauge, labels).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                               const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::kHistogram, labels).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

void Registry::callback(const std::string& name, const std::string& help, bool is_counter, const Labels& labels,
                        std::function<double()> read) {
  std::lock_guard<std::mutex> lock(mu_);
  family(name, help, is_counter ? Type::kCounter : Type::kGauge, labels).callbacks[labels] = std::move(read);
}

void Registry::removeCallbacks(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = families_.find(name);
  if (it != families_.end()) it->second.callbacks.clear();
}

std::string Registry::exposition() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  for (const auto& [name, f] : families_) {
    if (f.counters.empty() && f.gauges.empty() && f.histograms.empty() && f.callbacks.empty()) continue;
    out << "# HELP " << name << " " << escapeHelp(f.help) << "\n";
    out << "# TYPE " << name << " " << typeName(static_cast<int>(f.type)) << "\n";
    for (const auto& [labels, c] : f.counters)
      out << name << labelText(labels) << " " << formatValue(c->value()) << "\n";
    for (const auto& [labels, g] : f.gauges) out << name << labelText(labels) << " " << formatValue(g->value()) << "\n";
    for (const auto& [labels, read] : f.callbacks)
      out << name << labelText(labels) << " " << formatValue(read()) << "\n";
    for (const auto& [labels, h] : f.histograms) {
      auto counts = h->bucketCounts();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < counts.size(); ++i) {
        cumulative += counts[i];
        std::string le = i < h->bounds().size() ? formatValue(h->bounds()[i]) : "+Inf";
        out << name << "_bucket" << labelText(labels, "le", le) << " " << cumulative << "\n";
      }
      // sum and count read after the buckets may run ahead of them by in-flight observations; the
      // +Inf bucket is written as the count so the three agree as Prometheus requires.
      out << name << "_sum" << labelText(labels) << " " << formatValue(h->sum()) << "\n";
      out << name << "_count" << labelText(labels) << " " << cumulative << "\n";
    }
  }
  return out.str();
}

Registry& metrics() {
  static Registry* registry = new Registry();  // never destroyed: threads may scrape during exit
  return *registry;
}

}  // namespace zps::metrics
