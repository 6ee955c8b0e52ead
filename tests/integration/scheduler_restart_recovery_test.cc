// A scheduler restarted while a recovery is in progress (ZPS_RECOVERY, docs/reliability.md "A restarted
// scheduler"): a worker has left, its rank is held for a replacement and the other nodes wait for the
// new generation's address book, when the scheduler is SIGKILLed. The nodes register again with the
// generation they recover into, so the new scheduler goes on with that recovery: the replacement
// joins, the book of generation 1 goes out and the job ends with exact counters.
//
// The workers are `zps_integration_tests --async-counter-worker` (exactly_once_test.cc): 25 async
// increments each, counted again from 0 after a recovery.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

TEST_CASE(
    "scheduler restart during a recovery: the rebuilt scheduler goes on with the recovery and the replacement "
    "joins",
    "[scheduler]") {
  using Clock = std::chrono::steady_clock;
  Cluster c(1, 2);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "30");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "3");
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "40");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  auto startWorker = [&](int rank, const std::string& name, const std::string& pause_ms) {
    return c.start(
        name, {self, "--async-counter-worker"},
        {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", std::to_string(rank)}, {"ASYNC_COUNTER_PAUSE_MS", pause_ms}});
  };
  const int first = c.startScheduler();
  const int server = c.startServer();
  const int survivor = startWorker(0, "worker0", "0");
  const int leaver = startWorker(1, "worker1", "1000");
  REQUIRE(c.waitForLog(leaver, "pushed 10 of 25", 60s));
  c.signal(leaver, SIGTERM);  // it says goodbye: lost at once, rank 1 held for a replacement
  REQUIRE(c.waitForLog(first, "holding its rank for a replacement", 30s));
  c.signal(first, SIGKILL);
  CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
  const auto killed = Clock::now();
  const int second = c.startScheduler();
  const int replacement = startWorker(1, "worker1-replacement", "0");
  // Generation 1, or 2 when the lost worker's announcement reached the nodes before the SIGKILL (the
  // replacement's fresh registration starts one more).
  REQUIRE(c.waitForLog(second, "rebuilt from its nodes (generation ", 30s));
  const double rebuilt_s = std::chrono::duration<double>(Clock::now() - killed).count();
  for (int i : {survivor, replacement, server, second}) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 30s) == 0);
  }
  for (int i : {survivor, replacement}) CHECK(contains(c.log(i), "tensor 50, table row 50 (expected 50)"));
  CHECK(contains(c.log(survivor), "counting again from 0"));
  const std::string log = c.log(second);
  const size_t at = log.find("rebuilt from its nodes (generation ");
  std::cout << "scheduler restart during a recovery: the job was " << log.substr(at, log.find(')', at) - at + 1) << " "
            << rebuilt_s << " s after the SIGKILL and ended with exact counters" << std::endl;
}
