// Metrics: a small thread-safe registry of counters, gauges and fixed-bucket histograms, rendered in the
// Prometheus text exposition format (version 0.0.4) for `/metrics`.
//
// Ownership: one process-wide Registry (metrics()) lives until exit; the Counter/Gauge/Histogram objects
// it hands out are never freed, so hot paths keep plain references and update them with atomics only
// (no lock). Creating a series takes the registry lock; do it once, not per message. Any thread may
// update a series or render the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace zps::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Cumulative buckets as Prometheus expects: bucket i counts observations <= bounds[i], plus +Inf.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Per-bucket (non-cumulative) counts, the last one is +Inf; sum; count.
  std::vector<uint64_t> bucketCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Latency buckets from 50 us to 60 s: push/pull round trips span loopback microseconds to stalled
// seconds, and a fixed set keeps series comparable across nodes.
std::vector<double> latencyBuckets();

class Registry {
 public:
  // Each returns the series for (name, labels), creating the family and the series on first use. A name
  // must keep one type and help text; names and label names must match [a-zA-Z_:][a-zA-Z0-9_:]*.
  // Misuse is a programming error (CHECK), never peer input.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                       const Labels& labels = {});
  // A gauge or counter whose value is read at scrape time (queue depths, counters owned elsewhere).
  // `read` runs on the scraping thread and must be thread-safe. Replaces an earlier callback of the
  // same series.
  void callback(const std::string& name, const std::string& help, bool is_counter, const Labels& labels,
                std::function<double()> read);
  // Drops every callback series of `name` (its owner is going away).
  void removeCallbacks(const std::string& name);

  // Prometheus text format: families sorted by name, each with # HELP and # TYPE.
  std::string exposition() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
    std::map<Labels, std::function<double()>> callbacks;
  };
  Family& family(const std::string& name, const std::string& help, Type type, const Labels& labels);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// The process-wide registry.
Registry& metrics();

// A callback series that exists while this object lives: a member declared after what `read` reads,
// so that it is removed first. Created and destroyed by the owner's thread.
class ScopedCallback {
 public:
  ScopedCallback(std::string name, const std::string& help, bool is_counter, std::function<double()> read)
      : name_(std::move(name)) {
    metrics().callback(name_, help, is_counter, {}, std::move(read));
  }
  ~ScopedCallback() { metrics().removeCallbacks(name_); }
  ScopedCallback(const ScopedCallback&) = delete;
  ScopedCallback& operator=(const ScopedCallback&) = delete;

 private:
  std::string name_;
};

// Text-format helpers, exposed for tests.
std::string escapeLabelValue(const std::string& v);
std::string formatValue(double v);
bool validName(const std::string& name);

}  // namespace zps::metrics
