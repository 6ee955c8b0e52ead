// Barriers across a recovery (ZPS_RECOVERY, docs/reliability.md "Barriers"): a barrier belongs to the
// generation its caller works in. Once a newer generation has begun, a barrier of an older one fails
// with kUnavailable, recovering() is already true when it does, and the caller enters it again after
// recover(); it is never released by the new generation's arrivals.
//
// `zps_integration_tests --barrier-generation-worker` (tests/integration/main.cc) is the worker:
// BARRIER_ROLE=survivor passes barrier 1, waits for SIGUSR1 (sent once the replacement has joined the
// new generation) and enters a barrier without calling recover() first; BARRIER_ROLE=victim passes
// barrier 1 and waits to be killed; BARRIER_ROLE=replacement enters one barrier in the new generation.
#include <signal.h>
#include <zps/worker.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

int barrierGenerationWorker() {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // before the worker's threads start: they inherit it
  const char* role_env = std::getenv("BARRIER_ROLE");
  const std::string role = role_env != nullptr ? role_env : "";
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "barrier-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  zps::Worker& w = **worker;
  auto say = [&](const std::string& what) { std::cerr << "barrier-worker " << role << ": " << what << std::endl; };
  if (role == "replacement") {
    zps::Status s = w.barrier();
    say("barrier in the new generation: " + (s.ok() ? std::string("released") : s.message()));
    return w.finish(s);
  }
  zps::Status first = w.barrier();
  say("barrier 1: " + (first.ok() ? std::string("released") : first.message()));
  if (!first.ok()) return w.finish(first);
  if (role == "victim") {
    std::this_thread::sleep_for(120s);
    return w.finish(zps::InternalError("the victim was not killed"));
  }
  const timespec deadline{60, 0};
  if (sigtimedwait(&usr1, nullptr, &deadline) != SIGUSR1)
    return w.finish(zps::InternalError("no SIGUSR1 from the test within 60 s"));
  // The new generation's book is here, but this program has not recovered: its barrier is of the old one.
  zps::Status stale = w.barrier();
  const bool recovering = w.recovering();
  say("barrier 2 before recover(): " + (stale.ok() ? std::string("released") : stale.message()) + " (recovering() " +
      (recovering ? "true" : "false") + ")");
  if (stale.ok()) return w.finish(zps::InternalError("a barrier of the old generation was released in the new one"));
  if (stale.code() != zps::StatusCode::kUnavailable || !recovering)
    return w.finish(zps::InternalError("the old generation's barrier did not fail as recovering"));
  zps::Status recovered = w.recover();
  if (!recovered.ok()) return w.finish(recovered);
  zps::Status again = w.barrier();
  say("barrier 2 after recover(): " + (again.ok() ? std::string("released") : again.message()));
  return w.finish(again);
}

TEST_CASE(
    "barriers across a recovery: an old generation's barrier fails as recovering and is entered again after "
    "recover()",
    "[scheduler]") {
  Cluster c(1, 2);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "20");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "60");
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "30");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  auto start = [&](int rank, const std::string& role) {
    return c.start("worker" + std::to_string(rank) + "-" + role, {self, "--barrier-generation-worker"},
                   {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", std::to_string(rank)}, {"BARRIER_ROLE", role}});
  };
  const int scheduler = c.startScheduler();
  const int server = c.startServer();
  const int survivor = start(0, "survivor");
  const int victim = start(1, "victim");
  REQUIRE(c.waitForLog(survivor, "barrier 1: released", 60s));
  REQUIRE(c.waitForLog(victim, "barrier 1: released", 60s));
  c.signal(victim, SIGKILL);
  const int replacement = start(1, "replacement");
  // The replacement joined generation 1 and waits in its barrier; the survivor has that book too.
  REQUIRE(c.waitForLog(replacement, "connected to 1 servers", 60s));
  REQUIRE(c.waitForLog(scheduler, "address book of generation 1 sent", 30s));
  std::this_thread::sleep_for(300ms);
  c.signal(survivor, SIGUSR1);
  for (int i : {survivor, replacement, server, scheduler}) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 30s) == 0);
  }
  const std::string log = c.log(survivor);
  CHECK(contains(log, "barrier 2 before recover(): recovering"));
  CHECK(contains(log, "(recovering() true)"));
  CHECK(contains(log, "barrier 2 after recover(): released"));
  CHECK(contains(c.log(replacement), "barrier in the new generation: released"));
  std::cout << "barrier generation test: "
            << log.substr(log.find("barrier 2 before recover()"),
                          log.find('\n', log.find("barrier 2 before")) - log.find("barrier 2 before recover()"))
            << std::endl;
}
