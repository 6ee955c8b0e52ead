// The end of a job when the scheduler and a node lose touch at the wrong moment (docs/reliability.md,
// "A restarted scheduler" and "Connection resets"): a rebuilt scheduler whose workers have all finished
// still waits for every rank before it ends the job, and a Shutdown lost to a connection reset reaches
// its node when it comes back. Every node must exit 0, not wait out a timeout.
//
// One node reaches the scheduler through a relay on 127.0.0.2 (TcpProxy) that the test holds and cuts,
// while the others connect to 127.0.0.1 directly; the scheduler listens on 127.0.0.1 only.
#include <signal.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <thread>

#include "tests/integration/cluster.h"
#include "tests/integration/tcp_proxy.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::TcpProxy;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

const zps::testing::Env kSchedulerOnLoopback = {{"ZPS_BIND_HOST", "127.0.0.1"}};
const zps::testing::Env kThroughRelay = {{"DMLC_PS_ROOT_URI", "127.0.0.2"}};

}  // namespace

TEST_CASE(
    "scheduler end: a rebuilt scheduler whose workers all finished waits for a server still away, then ends "
    "the job and every node exits 0",
    "[scheduler]") {
  Cluster c(1, 1);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "4");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "60");  // a server never told of the end would wait this long
  TcpProxy relay("127.0.0.2", "127.0.0.1", c.port());
  const int first = c.startScheduler(kSchedulerOnLoopback);
  const int server = c.startServer(kThroughRelay);
  const int worker = c.startWorker(0, {"check", "--rounds", "4000", "--sizes", "256K", "--dtypes", "float32"});
  REQUIRE(c.waitForLog(worker, "connected to 1 servers", 60s));
  // The server's scheduler link stalls; its data keeps flowing to the worker.
  relay.hold();
  c.signal(first, SIGKILL);
  CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
  const int second = c.startScheduler(kSchedulerOnLoopback);
  REQUIRE(c.waitForLog(second, "registered worker 0", 30s));
  REQUIRE(c.running(worker));  // it finishes its rounds with the new scheduler, the server still away
  REQUIRE(c.waitForLog(second, "all workers finished, but the job is not rebuilt yet", 30s));
  const auto all_finished = Clock::now();
  std::this_thread::sleep_for(1s);
  CHECK(c.running(second));  // waiting for the server, not ending the job without it
  // The stalled link resets; the server registers again through the relay.
  relay.cut();
  relay.release();
  for (int i : {server, worker, second}) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 20s) == 0);
  }
  const double ended_s = secondsSince(all_finished);
  CHECK(contains(c.log(worker), " 0 wrong"));
  CHECK(contains(c.log(second), "the running job was rebuilt from its nodes"));
  CHECK(contains(c.log(server), "job complete: all workers finished"));
  std::cout << "scheduler end test (rebuilt): every node exited 0 " << ended_s
            << " s after the rebuilt scheduler heard every worker finish (1 s of it with the server held away)"
            << std::endl;
}

TEST_CASE(
    "scheduler end: a Shutdown lost to a connection reset reaches its node when it registers again, and it "
    "exits 0",
    "[scheduler]") {
  Cluster c(1, 1);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "15");  // a node that never hears of the end exits 1 after this
  TcpProxy relay("127.0.0.2", "127.0.0.1", c.port());
  const int scheduler = c.startScheduler(kSchedulerOnLoopback);
  const int server = c.startServer(kThroughRelay);
  // Enough rounds (about 2 s) that the worker cannot finish, and the scheduler send the server its
  // Shutdown, before the relay holds; few enough that the server, whose scheduler link is held, does not
  // reach its heartbeat timeout.
  const int worker = c.startWorker(0, {"check", "--rounds", "10000", "--sizes", "4K", "--dtypes", "float32"});
  REQUIRE(c.waitForLog(worker, "connected to 1 servers", 60s));
  relay.hold();  // the server's Shutdown will wait in the relay
  const auto held = Clock::now();
  INFO(c.logTail(scheduler));
  REQUIRE_FALSE(contains(c.log(scheduler), "shutting down all nodes"));  // else it passed before the hold
  REQUIRE(c.waitForLog(scheduler, "shutting down all nodes", 60s));
  const double held_s = secondsSince(held);
  REQUIRE(c.waitExit(worker, 10s) == 0);
  std::this_thread::sleep_for(200ms);  // the Shutdown is written into the relay
  const auto reset = Clock::now();
  CHECK(relay.cut() == 1);  // the reset loses it
  relay.release();
  INFO(c.logTail(server) << c.logTail(scheduler));
  CHECK(c.waitExit(server, 10s) == 0);
  const double server_s = secondsSince(reset);
  CHECK(c.waitExit(scheduler, 10s) == 0);
  CHECK(contains(c.log(server), "job complete: all workers finished"));
  CHECK(contains(c.log(scheduler), "again that the job ended"));
  CHECK(contains(c.log(scheduler), "every node acknowledged the end of the job"));
  std::cout << "scheduler end test (lost shutdown): the worker finished " << held_s
            << " s after the hold; the server exited 0 " << server_s
            << " s after the reset that lost its Shutdown (heartbeat timeout 15 s)" << std::endl;
}
