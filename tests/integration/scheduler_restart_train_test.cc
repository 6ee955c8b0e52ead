// `zps train` through a scheduler SIGKILL and restart (docs/reliability.md, "A restarted scheduler"):
// with ZPS_RECOVERY=1 the new scheduler, on the same port, rebuilds the running job from its nodes
// and the training ends with exactly the weights of an undisturbed run.
//
// Exact, not close: batches are deterministic (fixed --seed), training is synchronous, and with two
// workers each sum has two terms, whose float addition commutes, so no arrival order can change a
// bit. Both the dense weights (worker 0's --weights_out, byte for byte, and every worker's weights
// checksum) and the servers' embedding table (the checksum of the rows each server checkpoints at
// the last step) are compared.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <regex>
#include <thread>

#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::finalMetric;
using zps::testing::readFile;
using zps::testing::weightsChecksum;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

// A CTR model (dense weights on the workers, an adam embedding table on the servers): 2 x 2
// processes, 250 steps per epoch of 2 x 64 rows, a checkpoint at the end of each epoch. Ten epochs,
// so that on idle cores the job still trains when the restarted scheduler has rebuilt it (with four,
// the last epoch had begun 1.9 s after the SIGKILL).
constexpr int kEpochs = 10;
std::vector<std::string> seededTraining() {
  std::vector<std::string> args = zps::testing::ctrAdamTraining(64, kEpochs);
  args.insert(args.end(), {"--seed", "7"});
  return args;
}
const std::vector<std::string> kTraining = seededTraining();

struct TrainRun {
  std::string weights;                         // worker 0's --weights_out, raw float32
  std::vector<std::string> weights_checksums;  // each worker's "weights checksum"
  std::string table;                           // "rows/checksum" of the servers' last checkpoint of the table
  double auc = 0;
  std::string worker_log;
  // Disturbed runs only: seconds from the SIGKILL to the rebuilt job, and the epochs worker 0 had
  // reported when the new scheduler had rebuilt the job.
  double rebuilt_s = 0;
  int epochs_at_rebuild = -1;
};

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The total rows and the sum of the checksums of the last "checkpointed table 'train/embedding' (N
// rows, checksum C) at step S" line of each server log (the servers' checksums add up to the table's).
std::string lastTableCheckpoint(const std::vector<std::string>& server_logs) {
  const std::regex re(
      "checkpointed table 'train/embedding' \\(([0-9]+) rows, checksum ([0-9a-f]+)\\) at step ([0-9]+)");
  uint64_t rows = 0, checksum = 0, step = 0;
  for (const auto& log : server_logs) {
    std::smatch last;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) last = *it;
    INFO(log);
    REQUIRE(!last.empty());
    rows += std::stoull(last[1]);
    checksum += std::stoull(last[2], nullptr, 16);
    if (step != 0) CHECK(std::stoull(last[3]) == step);
    step = std::stoull(last[3]);
  }
  char text[96];
  std::snprintf(text, sizeof(text), "%llu rows, checksum %016llx at step %llu", static_cast<unsigned long long>(rows),
                static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(step));
  return text;
}

TrainRun trainWithScheduler(bool restart) {
  Cluster c(2, 2);
  const std::string weights = c.dir() + "/weights";
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "4");
  c.setEnv("ZPS_CHECKPOINT_DIR", c.dir() + "/ckpt");
  const int first = c.startScheduler();
  const std::vector<int> servers = {c.startServer(), c.startServer()};
  std::vector<std::string> argv0 = kTraining;
  argv0.insert(argv0.end(), {"--weights_out", weights});
  const std::vector<int> workers = {c.startWorker(0, argv0), c.startWorker(1, kTraining)};
  std::vector<int> all = {first};
  TrainRun run;
  if (restart) {
    // Mid-training: after epoch 1.
    REQUIRE(c.waitForLog(workers[0], "Training. Epoch 1,", 120s));
    c.signal(first, SIGKILL);
    CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
    const auto killed = Clock::now();
    // As a restarted pod would: the nodes find a new process behind the scheduler's address.
    std::this_thread::sleep_for(1s);
    for (int w : workers) REQUIRE(c.running(w));
    const int second = c.startScheduler();
    INFO(c.logTail(second));
    REQUIRE(c.waitForLog(second, "rebuilt from its nodes", 60s));
    run.rebuilt_s = std::chrono::duration<double>(Clock::now() - killed).count();
    run.epochs_at_rebuild = count(c.log(workers[0]), "Training. Epoch ");
    for (int w : workers) CHECK(c.running(w));  // the job was rebuilt while it was training
    all = {second};
  }
  all.insert(all.end(), servers.begin(), servers.end());
  all.insert(all.end(), workers.begin(), workers.end());
  for (int i : all) {
    INFO(c.logTail(i));
    REQUIRE(c.waitExit(i, 180s) == 0);
  }
  run.weights = readFile(weights);
  for (int w : workers) run.weights_checksums.push_back(weightsChecksum(c.log(w)));
  run.table = lastTableCheckpoint({c.log(servers[0]), c.log(servers[1])});
  run.worker_log = c.log(workers[0]);
  run.auc = finalMetric(run.worker_log, "auc");
  if (restart) {
    // The workers went on training under the new scheduler, without a rollback (no node was lost).
    CHECK(run.epochs_at_rebuild < kEpochs);
    CHECK(count(run.worker_log, "Training. Epoch ") == kEpochs);
    CHECK_FALSE(contains(run.worker_log, "rolling back to the latest checkpoint"));
  }
  return run;
}

}  // namespace

TEST_CASE(
    "train: scheduler SIGKILLed and restarted mid-training with ZPS_RECOVERY: the job ends with exactly the weights "
    "of an undisturbed run",
    "[reconnect]") {
  const TrainRun undisturbed = trainWithScheduler(false);
  const TrainRun restarted = trainWithScheduler(true);
  REQUIRE(!undisturbed.weights.empty());
  CHECK(restarted.weights.size() == undisturbed.weights.size());
  CHECK(restarted.weights == undisturbed.weights);
  CHECK(restarted.weights_checksums == undisturbed.weights_checksums);
  CHECK(restarted.table == undisturbed.table);
  CHECK(restarted.auc == undisturbed.auc);
  std::printf(
      "scheduler restart during zps train: rebuilt %.1f s after the SIGKILL with worker 0 at epoch %d of %d; dense "
      "weights (%zu bytes) %s, checksum %s vs %s; table %s vs %s; AUC %.4f vs %.4f\n",
      restarted.rebuilt_s, restarted.epochs_at_rebuild, kEpochs, restarted.weights.size(),
      restarted.weights == undisturbed.weights ? "identical" : "DIFFER", restarted.weights_checksums[0].c_str(),
      undisturbed.weights_checksums[0].c_str(), restarted.table.c_str(), undisturbed.table.c_str(), restarted.auc,
      undisturbed.auc);
}
