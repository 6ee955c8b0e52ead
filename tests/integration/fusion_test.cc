// Fusion of small requests (ZPS_FUSION_BYTES, worker/scheduling/fusion.h) with the real zps binary on loopback:
// zps check's exact sums when a call's small partitions travel fused, with and without priority
// scheduling (whose released pushes fuse too), and under drops, duplicates and delays, where resends
// and duplicated fused messages must still be summed once.
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

// "server 0: 12 fused messages carried 340 requests": the requests, 0 when the line is missing.
uint64_t fusedRequests(const std::string& log) {
  static const std::regex line(R"((\d+) fused messages carried (\d+) requests)");
  std::smatch m;
  return std::regex_search(log, m, line) ? std::stoull(m[2]) : 0;
}

}  // namespace

TEST_CASE("fusion: check's exact sums with a call's small partitions fused, FIFO and priority") {
  const char* priority = GENERATE("0", "1");
  INFO("ZPS_PRIORITY=" << priority);
  Cluster c(2, 2);
  c.setEnv("ZPS_PRIORITY", priority);
  c.setEnv("ZPS_CREDIT_BYTES", "16384");    // scheduled pushes queue, and leave several at once
  c.setEnv("ZPS_PARTITION_BYTES", "4096");  // a 1 MiB tensor is 256 partitions, 128 per server
  c.setEnv("ZPS_FUSION_BYTES", "65536");
  c.startScheduler();
  const int s0 = c.startServer();
  const int s1 = c.startServer();
  std::vector<int> w;
  for (int i = 0; i < 2; ++i)
    w.push_back(c.startWorker(i, {"check", "--rounds", "5", "--sizes", "1,7,4K,64K+4,1M+8", "--dtypes",
                                  "float32,int32,float16", "--threads", "2"}));
  c.expectAllExitZero(180s);
  for (int i : w) {
    INFO(c.logTail(i));
    CHECK(contains(c.log(i), " 0 wrong"));
  }
  INFO(c.logTail(s0) << c.logTail(s1));
  CHECK(fusedRequests(c.log(s0)) + fusedRequests(c.log(s1)) > 100);
}

TEST_CASE("fusion: with drops, duplicates and delays, fused requests and their resends are summed once") {
  Cluster c(2, 2);
  c.setEnv("ZPS_TEST_FAULTS", "drop=0.05,dup=0.05,delay=0.05");
  c.setEnv("ZPS_RESEND_TIMEOUT", "0.3");
  c.setEnv("ZPS_PARTITION_BYTES", "4096");
  c.startScheduler();
  const int s0 = c.startServer();
  const int s1 = c.startServer();
  const int w0 = c.startWorker(0, {"check", "--rounds", "10", "--sizes", "1,64K+4,256K"});
  const int w1 = c.startWorker(1, {"check", "--rounds", "10", "--sizes", "1,64K+4,256K"});
  c.expectAllExitZero(180s);
  for (int w : {w0, w1}) {
    INFO(c.logTail(w));
    CHECK(contains(c.log(w), " 0 wrong"));
  }
  INFO(c.logTail(s0) << c.logTail(s1));
  CHECK(fusedRequests(c.log(s0)) + fusedRequests(c.log(s1)) > 0);
  CHECK(contains(c.log(s0), "injected"));
  CHECK((contains(c.log(w0), "resent") || contains(c.log(w1), "resent")));
}

TEST_CASE("fusion: ZPS_FUSION_BYTES=0 sends every request alone") {
  Cluster c(1, 2);
  c.setEnv("ZPS_PARTITION_BYTES", "4096");
  c.setEnv("ZPS_FUSION_BYTES", "0");
  c.startScheduler();
  const int s0 = c.startServer();
  const int w0 = c.startWorker(0, {"check", "--rounds", "3", "--sizes", "64K"});
  c.startWorker(1, {"check", "--rounds", "3", "--sizes", "64K"});
  c.expectAllExitZero(120s);
  CHECK(contains(c.log(w0), " 0 wrong"));
  CHECK_FALSE(contains(c.log(s0), "fused messages carried"));
}
