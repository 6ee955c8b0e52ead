// Async exactly-once (server/sequence_window.h) against real processes: 4 workers each add 1 to an
// async tensor and to a row of an async table 25 times, with several pushes in flight, while the
// transport drops, duplicates and delays messages (ZPS_TEST_FAULTS) and workers resend what goes
// unanswered. Both counters must read exactly 100; without the push numbers they read more (every
// duplicate and every resend of a push whose answer was lost added again). And under ZPS_RECOVERY,
// a worker killed midway and replaced numbers its pushes from 1 again, like every worker after the
// new generation, and none of them is taken for a duplicate.
#include <signal.h>
#include <zps/worker.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

constexpr int kIncrements = 25;
constexpr int kInFlight = 5;  // pushes issued before waiting: later ones overtake resent ones

// Waits for every handle; the first failure.
zps::Status waitAll(zps::Worker& w, std::vector<zps::Handle>* handles) {
  zps::Status first;
  for (zps::Handle h : *handles) {
    zps::Status s = w.wait(h);
    if (!s.ok() && first.ok()) first = s;
  }
  handles->clear();
  return first;
}

// ASYNC_COUNTER_PAUSE_MS: a pause after every kInFlight increments, so a test can kill a worker midway.
zps::Status countTo(zps::Worker& w, std::chrono::milliseconds pause) {
  auto counter = w.declareAsync("exactly/counter", sizeof(float), zps::DType::kFloat32);
  if (!counter.ok()) return counter.status();
  zps::TableOptions options;
  options.dim = 1;
  options.optimizer = "sgd";
  options.lr = 1.0f;
  options.init_scale = 0;  // rows start at 0; SGD with lr 1 adds 1 per gradient of -1
  options.async = 1;
  auto table = w.declareTable("exactly/rows", options);
  if (!table.ok()) return table.status();
  const float one = 1.0f, minus_one = -1.0f;
  const uint64_t row = 7;
  std::vector<zps::Handle> handles;
  for (int i = 0; i < kIncrements; ++i) {
    auto pushed = w.push(*counter, &one);
    if (!pushed.ok()) return pushed.status();
    handles.push_back(*pushed);
    auto rows = w.pushRows(*table, &row, 1, &minus_one);
    if (!rows.ok()) return rows.status();
    handles.push_back(*rows);
    if (handles.size() < 2 * kInFlight) continue;
    ZPS_RETURN_IF_ERROR(waitAll(w, &handles));
    std::cerr << "async-counter-worker " << w.rank() << ": pushed " << i + 1 << " of " << kIncrements << std::endl;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  ZPS_RETURN_IF_ERROR(waitAll(w, &handles));
  ZPS_RETURN_IF_ERROR(w.barrier());  // every worker's pushes are answered, so applied
  float total = -1, row_value = -1;
  auto pulled = w.pull(*counter, &total);
  if (!pulled.ok()) return pulled.status();
  handles.push_back(*pulled);
  auto pulled_row = w.pullRows(*table, &row, 1, &row_value);
  if (!pulled_row.ok()) return pulled_row.status();
  handles.push_back(*pulled_row);
  ZPS_RETURN_IF_ERROR(waitAll(w, &handles));
  const float expected = static_cast<float>(kIncrements * w.numWorkers());
  std::cerr << "async-counter-worker " << w.rank() << ": tensor " << total << ", table row " << row_value
            << " (expected " << expected << ")" << std::endl;
  if (total != expected || row_value != expected) return zps::InternalError("an async counter is not exact");
  return w.barrier();  // nobody leaves while another still pulls
}

}  // namespace

// `zps_integration_tests --async-counter-worker` (tests/integration/main.cc).
int asyncCounterWorker() {
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "async-counter-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  zps::Worker& w = **worker;
  const char* pause = std::getenv("ASYNC_COUNTER_PAUSE_MS");
  const std::chrono::milliseconds pause_ms(pause != nullptr ? std::atoi(pause) : 0);
  zps::Status result;
  for (int attempt = 1;; ++attempt) {
    result = countTo(w, pause_ms);
    // ZPS_RECOVERY: a lost worker makes the servers drop the counters, so everyone counts again. A
    // push failed by a server's "recovering" answer finds recovering() already true.
    if (result.ok() || !w.recovering() || attempt == 3) break;
    std::cerr << "async-counter-worker " << w.rank() << ": " << result.message() << "; counting again from 0"
              << std::endl;
    result = w.recover();
    if (!result.ok()) break;
  }
  if (!result.ok()) std::cerr << "async-counter-worker: FAILED: " << result.message() << std::endl;
  return w.finish(result);
}

TEST_CASE("async exactly-once: 4 workers x 25 increments read exactly 100 under drops, duplicates and delays") {
  Cluster c(2, 4);
  // Delays longer than the resend timeout: a delayed push arrives after its resend, a second copy.
  c.setEnv("ZPS_TEST_FAULTS", "drop=0.1,dup=0.1,delay=0.1,delay_ms=500");
  c.setEnv("ZPS_RESEND_TIMEOUT", "0.3");
  c.startScheduler();
  const int s0 = c.startServer();
  const int s1 = c.startServer();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<int> workers;
  for (int rank = 0; rank < 4; ++rank) {
    workers.push_back(c.start("worker" + std::to_string(rank), {self, "--async-counter-worker"},
                              {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", std::to_string(rank)}}));
  }
  c.expectAllExitZero(180s);
  for (int w : workers) {
    INFO(c.logTail(w));
    CHECK(contains(c.log(w), "tensor 100, table row 100 (expected 100)"));
  }
  // The faults reached the async pushes: copies came and were not applied again.
  const std::regex copies(R"((\d+) async pushes came again)");
  uint64_t total = 0;
  for (int s : {s0, s1}) {
    const std::string log = c.log(s);
    std::smatch m;
    if (std::regex_search(log, m, copies)) total += std::stoull(m[1]);
  }
  std::printf("async exactly-once: counters at 100 with %llu copies of async pushes acknowledged without applying\n",
              static_cast<unsigned long long>(total));
  INFO(c.logTail(s0) << c.logTail(s1));
  CHECK(total > 0);
}

TEST_CASE(
    "async exactly-once with ZPS_RECOVERY: a replaced worker numbers its pushes from 1 again and the counters read "
    "exactly 100") {
  Cluster c(2, 4);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "20");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "60");
  std::vector<int> keep = {c.startScheduler(), c.startServer(), c.startServer()};
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  auto startWorker = [&](int rank, const std::string& name, const std::string& pause_ms) {
    return c.start(
        name, {self, "--async-counter-worker"},
        {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", std::to_string(rank)}, {"ASYNC_COUNTER_PAUSE_MS", pause_ms}});
  };
  // Only the victim is paced, so that it is killed midway; the others run ahead into their barrier
  // of generation 0, which fails as recovering when the victim is lost, and count again.
  std::vector<int> survivors;
  for (int rank = 0; rank < 3; ++rank) survivors.push_back(startWorker(rank, "worker" + std::to_string(rank), "0"));
  const int victim = startWorker(3, "worker3", "1000");
  REQUIRE(c.waitForLog(victim, "pushed 10 of 25"));
  c.signal(victim, SIGKILL);
  const int replacement = startWorker(3, "worker3-replacement", "0");
  CHECK(c.waitExit(victim, 10s) == 128 + SIGKILL);
  for (int i : survivors) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 120s) == 0);
    CHECK(contains(c.log(i), "counting again from 0"));
    CHECK(contains(c.log(i), "tensor 100, table row 100 (expected 100)"));
  }
  INFO(c.logTail(replacement));
  CHECK(c.waitExit(replacement, 60s) == 0);
  CHECK(contains(c.log(replacement), "tensor 100, table row 100 (expected 100)"));
  for (int i : keep) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 60s) == 0);
  }
}
