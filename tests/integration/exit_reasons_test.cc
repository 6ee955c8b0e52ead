// Exits that say the true reason, in time: a trace folder that cannot be written is refused at the
// start (exit 2), a server that was stopped past the heartbeat timeout and replaced ends as soon as it
// resumes, saying it was replaced, and a scheduler that gets SIGTERM exits within the 5 s that
// `zps launch` grants before SIGKILL, even when a node never acknowledges the end.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

TEST_CASE("exit reasons: a ZPS_TRACE_DIR that cannot be written is refused at the start in every role") {
  Cluster c(1, 1);
  const std::string not_a_folder = c.dir() + "/a-file";
  std::ofstream(not_a_folder) << "x\n";
  c.setEnv("ZPS_TRACE_ON", "1");
  c.setEnv("ZPS_TRACE_DIR", not_a_folder + "/trace");
  const auto start = Clock::now();
  for (int i : {c.startScheduler(), c.startServer(), c.startWorker(0, {"check", "--rounds", "1"})}) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 20s) == 2);
    CHECK(contains(c.log(i), "ZPS_TRACE_DIR=" + not_a_folder + "/trace cannot be created"));
  }
  std::printf("exit reasons: unwritable ZPS_TRACE_DIR: 3 roles exited 2 after %.2f s\n", secondsSince(start));
}

TEST_CASE("exit reasons: a server stopped past the heartbeat timeout and replaced ends at once when resumed") {
  Cluster c(1, 1);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.5");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "2");
  int sched = c.startScheduler();
  int old_server = c.startServer({{"ZPS_SERVER_ID", "0"}});
  int worker = c.startWorker(0, {"train", "--data", "synthetic-regression", "--model", "linear", "--epochs", "100000"});
  REQUIRE(c.waitForLog(worker, "connected to 1 servers", 30s));
  c.signal(old_server, SIGSTOP);
  REQUIRE(c.waitForLog(sched, "lost server 0", 30s));
  c.startServer({{"ZPS_SERVER_ID", "0"}});
  REQUIRE(c.waitForLog(sched, "every rank is held again", 30s));
  const auto resumed = Clock::now();
  c.signal(old_server, SIGCONT);
  INFO(c.logTail(old_server) << c.logTail(sched));
  CHECK(c.waitExit(old_server, 20s) == 1);
  const double seconds = secondsSince(resumed);
  std::printf("exit reasons: the replaced server ended %.2f s after it was resumed\n", seconds);
  CHECK(seconds < 5);
  CHECK(contains(c.log(old_server), "server 0 (pid " + std::to_string(c.pid(old_server)) +
                                        ") was declared dead in generation 0 and replaced by server 0"));
  CHECK(!contains(c.log(old_server), "did not come back within"));
  CHECK(c.running(worker));  // the job goes on with the replacement
}

TEST_CASE("exit reasons: after SIGTERM the scheduler exits within zps launch's 5 s grace") {
  // Default heartbeats (every 5 s): the scheduler lingers 10 s for the acknowledgements of a normal
  // end; a worker that was killed never sends its acknowledgement.
  Cluster c(1, 2);
  int sched = c.startScheduler();
  c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "1000000", "--sizes", "4K"});
  int w1 = c.startWorker(1, {"check", "--rounds", "1000000", "--sizes", "4K"});
  REQUIRE(c.waitForLog(w0, "connected to 1 servers", 30s));
  REQUIRE(c.waitForLog(w1, "connected to 1 servers", 30s));
  c.signal(w1, SIGKILL);
  const auto terminated = Clock::now();
  c.signal(sched, SIGTERM);
  INFO(c.logTail(sched));
  CHECK(c.waitExit(sched, 30s) == 0);
  const double seconds = secondsSince(terminated);
  std::printf("exit reasons: the scheduler exited %.2f s after SIGTERM\n", seconds);
  CHECK(seconds < 4.5);
  c.waitAll(30s);
}
