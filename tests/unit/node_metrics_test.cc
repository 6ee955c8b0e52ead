// Tests for the metrics registry (ps/node/metrics.h): exposition format, label escaping, cumulative
// histogram buckets, callbacks, and concurrent updates.
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ps/node/metrics.h"

namespace zps::metrics {
namespace {

TEST_CASE("exposition: HELP, TYPE, labels and values", "[metrics][registry]") {
  Registry r;
  r.counter("zps_t_bytes_total", "Bytes\nmoved", {{"server", "0"}}).inc(3);
  r.counter("zps_t_bytes_total", "Bytes\nmoved", {{"server", "1"}}).inc(2.5);
  r.gauge("zps_t_depth", "Depth").set(-4);
  r.callback("zps_t_cb", "From a callback", false, {{"name", "a\"b\\c\nd"}}, [] { return 7.0; });
  std::string text = r.exposition();
  CHECK(text ==
        "# HELP zps_t_bytes_total Bytes\\nmoved\n"
        "# TYPE zps_t_bytes_total counter\n"
        "zps_t_bytes_total{server=\"0\"} 3\n"
        "zps_t_bytes_total{server=\"1\"} 2.5\n"
        "# HELP zps_t_cb From a callback\n"
        "# TYPE zps_t_cb gauge\n"
        "zps_t_cb{name=\"a\\\"b\\\\c\\nd\"} 7\n"
        "# HELP zps_t_depth Depth\n"
        "# TYPE zps_t_depth gauge\n"
        "zps_t_depth -4\n");
  r.removeCallbacks("zps_t_cb");
  CHECK(r.exposition().find("zps_t_cb") == std::string::npos);
}

TEST_CASE("histogram buckets are cumulative and end with +Inf = count", "[metrics][registry]") {
  Registry r;
  Histogram& h = r.histogram("zps_t_seconds", "Latency", {0.001, 0.01, 0.1});
  for (double v : {0.0005, 0.001, 0.005, 0.05, 5.0}) h.observe(v);
  std::string text = r.exposition();
  CHECK(text.find("zps_t_seconds_bucket{le=\"0.001\"} 2\n") != std::string::npos);  // le is inclusive
  CHECK(text.find("zps_t_seconds_bucket{le=\"0.01\"} 3\n") != std::string::npos);
  CHECK(text.find("zps_t_seconds_bucket{le=\"0.1\"} 4\n") != std::string::npos);
  CHECK(text.find("zps_t_seconds_bucket{le=\"+Inf\"} 5\n") != std::string::npos);
  CHECK(text.find("zps_t_seconds_count 5\n") != std::string::npos);
  CHECK(text.find("zps_t_seconds_sum 5.0565\n") != std::string::npos);
  CHECK(text.find("# TYPE zps_t_seconds histogram\n") != std::string::npos);
}

TEST_CASE("values and names", "[metrics][registry]") {
  CHECK(formatValue(5e-05) == "5e-05");
  CHECK(formatValue(1e20) == "1e+20");
  CHECK(formatValue(0.1) == "0.1");
  CHECK(formatValue(1.0 / 0.0) == "+Inf");
  CHECK(validName("zps_worker_pushed_bytes_total"));
  CHECK(!validName("9lives"));
  CHECK(!validName("zps-worker"));
  CHECK(escapeLabelValue("x\"y") == "x\\\"y");
}

TEST_CASE("concurrent increments are not lost", "[metrics][registry]") {
  Registry r;
  Counter& c = r.counter("zps_t_total", "Count");
  Histogram& h = r.histogram("zps_t_h", "H", latencyBuckets());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.inc();
        h.observe(0.002);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(c.value() == 40000);
  CHECK(h.count() == 40000);
}

}  // namespace
}  // namespace zps::metrics
