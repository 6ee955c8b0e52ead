// Priority scheduling (worker/scheduling/push_scheduler.h) with the real zps binary on loopback: exact sums with
// small credits, and the bench's FIFO-against-priority overlap comparison.
#include <catch2/catch.hpp>
#include <iostream>
#include <string>
#include <tuple>
#include <utility>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

TEST_CASE("priority scheduling: check's exact sums with a credit of one small partition, threads issuing at once") {
  // Scheduled pushes on their own lane (the default), and on the one connection; with push hints (the
  // default), which reorder the queues by what the servers name, and without; with the servers pacing
  // the workers' pushes (a lead of one partition, and of 1 byte: any worker ahead waits), and not (the
  // default).
  using Switches = std::tuple<std::string, std::string, std::string>;  // LANE, HINTS, PACING
  const auto [push_lane, push_hints, pacing] =
      GENERATE(Switches{"1", "1", "0"}, Switches{"0", "1", "4096"}, Switches{"1", "0", "0"}, Switches{"1", "1", "1"});
  INFO("ZPS_PUSH_LANE=" << push_lane << " ZPS_PUSH_HINTS=" << push_hints << " ZPS_PUSH_PACING_BYTES=" << pacing);
  Cluster c(2, 3);
  c.setEnv("ZPS_PRIORITY", "1");
  c.setEnv("ZPS_PUSH_LANE", push_lane);
  c.setEnv("ZPS_PUSH_HINTS", push_hints);
  c.setEnv("ZPS_PUSH_PACING_BYTES", pacing);
  c.setEnv("ZPS_CREDIT_BYTES", "5000");     // one 4 KiB partition in flight per server
  c.setEnv("ZPS_PARTITION_BYTES", "4096");  // the 1 MiB tensor is 256 partitions
  c.setEnv("ZPS_REQUEST_TIMEOUT", "60");    // a credit deadlock fails the waits, naming them
  c.startScheduler();
  const std::vector<int> servers{c.startServer(), c.startServer()};
  std::vector<int> w;
  for (int i = 0; i < 3; ++i)
    w.push_back(c.startWorker(i, {"check", "--rounds", "5", "--sizes", "1,7,4K,64K+4,1M+8", "--dtypes",
                                  "float32,int32,float16", "--threads", "3"}));
  c.expectAllExitZero(180s);
  // Without pacing no acknowledgement waits; with a lead of 1 byte some do.
  size_t paced = 0;
  for (int s : servers) {
    const std::string log = c.log(s);
    paced += contains(log, "push acknowledgements waited for the slower workers");
    if (const size_t p = log.find("push acknowledgements waited"); p != std::string::npos)
      std::cout << "priority test: " << log.substr(log.rfind("server ", p), log.find('\n', p) - log.rfind("server ", p))
                << "\n";
  }
  if (pacing == "0") CHECK(paced == 0);
  if (pacing == "1") CHECK(paced > 0);
  for (int i : w) {
    INFO(c.logTail(i));
    CHECK(contains(c.log(i), " 0 wrong"));
    CHECK(contains(c.log(i), push_lane == "1" ? "push lanes open to 2 of 2 servers" : "connected to 2 servers"));
    CHECK(contains(c.log(i), "push lanes open") == (push_lane == "1"));
    // Without hints nothing is hurried; with them, how much is up to the timing (printed, not checked).
    const std::string log = c.log(i);
    if (push_hints == "0") CHECK_FALSE(contains(log, "push hints sent"));
    const size_t at = log.find("push hints sent");
    if (at != std::string::npos)
      std::cout << "priority test: worker " << i << ": " << log.substr(at, log.find('\n', at) - at) << "\n";
  }
}

TEST_CASE("zps bench --model resnet50 --compute_ms: FIFO and priority iterations with simulated compute") {
  Cluster c(2, 2);
  c.setEnv("ZPS_CREDIT_BYTES", "1048576");
  c.startScheduler();
  c.startServer();
  c.startServer();
  std::vector<std::string> args = {"bench", "--model",        "resnet50", "--compute_ms", "30",   "--min_iters",
                                   "2",     "--warmup_iters", "1",        "--link_mbit",  "10000"};
  int w0 = c.startWorker(0, args);
  c.startWorker(1, args);
  c.expectAllExitZero(180s);
  INFO(c.log(w0));
  CHECK(contains(c.log(w0), "resnet50 fifo, communication only"));
  CHECK(contains(c.log(w0), "resnet50 priority + compute"));
  CHECK(contains(c.log(w0), "simulated compute 30.0 ms per iteration"));
  CHECK(contains(c.log(w0), "# communication bound: 102.2 MB / 10000 Mbit/s = 81.8 ms"));
  CHECK(contains(c.log(w0), "goal: priority iteration / max(compute, communication), resnet50: "));
  CHECK(contains(c.log(w0), "# zps bench: PASS"));
}
