// A wait that times out cancels its operation: the late reply is dropped and never written into the
// caller's buffer, and the round can be pulled again (include/zps/worker.h, docs/cpp-api.md).
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "cluster.h"

namespace zps::testing {
namespace {

using namespace std::chrono_literals;

TEST_CASE("cancellation: a timed-out pull never writes into the buffer, and the round is pulled again") {
  Cluster c(1, 1);
  c.startScheduler();
  const int server = c.startServer();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const int worker = c.start("worker0", {self, "--late-reply-worker", std::to_string(c.pid(server))},
                             {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", "0"}});
  REQUIRE(c.waitForLog(worker, "late-reply-worker: server resumed", 60s));
  INFO(c.logTail(worker));
  CHECK(contains(c.log(worker),
                 "late-reply-worker: first pull: pull of "
                 "'late/grad' round 1: 1 replies missing "
                 "after 1 s: key 0 from server 0 (127.0.0.1:"));
  CHECK(contains(c.log(worker),
                 "the operation was cancelled: nothing more is "
                 "written into its buffer, and the "
                 "next pull of 'late/grad' retries round 1"));
  // The server answers the pull once it runs again; the worker drops that reply.
  REQUIRE(c.waitForLog(worker, "dropped the late reply to cancelled request", 60s));
  c.signal(worker, SIGUSR1);
  CHECK(c.waitExit(worker, 60s) == 0);
  INFO(c.logTail(worker));
  CHECK(contains(c.log(worker), "late-reply-worker: the buffer still holds the sentinel"));
  CHECK(contains(c.log(worker), "late-reply-worker: round 1 pulled again and round 2 done"));
  c.expectAllExitZero(60s);
}

}  // namespace
}  // namespace zps::testing
