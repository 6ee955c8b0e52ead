// `zps train` through failures: a cluster killed after an epoch resumes from its checkpoint, a lost
// node is replaced under ZPS_RECOVERY and the job ends with exactly the weights of an undisturbed run,
// and a corrupt checkpoint is a clear error.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::finalMetric;
using zps::testing::maxRelativeDifference;
using zps::testing::readWeights;
using namespace std::chrono_literals;

TEST_CASE("train: a cluster killed after epoch 2 resumes from its checkpoint and ends like an uninterrupted run") {
  const std::vector<std::string> args = zps::testing::ctrAdamTraining(128);
  double uninterrupted = 0;
  {
    Cluster c(2, 2);
    c.setEnv("ZPS_CHECKPOINT_DIR", c.dir() + "/ckpt");
    c.startScheduler();
    c.startServer();
    c.startServer();
    int w0 = c.startWorker(0, args);
    c.startWorker(1, args);
    for (int code : c.waitAll(300s)) REQUIRE(code == 0);
    uninterrupted = finalMetric(c.log(w0), "auc");
  }
  Cluster c(2, 2);
  std::string dir = c.dir() + "/ckpt";
  c.setEnv("ZPS_CHECKPOINT_DIR", dir);
  std::vector<int> first;
  first.push_back(c.startScheduler());
  first.push_back(c.startServer());
  first.push_back(c.startServer());
  int w0 = c.startWorker(0, args);
  first.push_back(w0);
  first.push_back(c.startWorker(1, args));
  REQUIRE(c.waitForLog(w0, "Training. Epoch 2,", 120s));
  for (int i : first) c.signal(i, SIGKILL);
  for (int i : first) c.waitExit(i, 20s);
  REQUIRE(std::ifstream(dir + "/latest").good());

  c.startScheduler();
  c.startServer({{"ZPS_SERVER_ID", "0"}});
  c.startServer({{"ZPS_SERVER_ID", "1"}});
  int r0 = c.startWorker(0, args);
  int r1 = c.startWorker(1, args);
  CHECK(c.waitExit(r0, 300s) == 0);
  CHECK(c.waitExit(r1, 60s) == 0);
  std::string log = c.log(r0);
  INFO(log);
  CHECK(contains(log, "resumes from the checkpoint at step"));
  CHECK_FALSE(contains(log, "Training. Epoch 1,"));
  double resumed = finalMetric(log, "auc");
  std::printf("checkpoint: uninterrupted AUC %.4f, killed after epoch 2 and resumed %.4f\n", uninterrupted, resumed);
  CHECK(std::fabs(resumed - uninterrupted) <= 0.01);
}

// ZPS_RECOVERY: SIGKILL one node of a 2 x 2 training job at the end of epoch 1 and start a replacement
// with the same rank (and checkpoint dir). Every surviving process carries on, the workers roll back to
// the latest checkpoint, and the job ends with exactly the weights of an undisturbed run: batches are
// deterministic and two workers' sums do not depend on their order.
namespace {

struct RecoveryRun {
  std::vector<float> weights;
  double metric = 0;
  // peer_log: worker 0's local rank 1 (local_size > 1); killed_peer_code: the exit code of the killed
  // worker's local rank 0 after its local rank 1 was killed.
  std::string worker_log, scheduler_log, replacement_log, peer_log;
  int killed_peer_code = 0;
};

using Env = std::vector<std::pair<std::string, std::string>>;

// local_size > 1: every worker node runs that many processes (ZPS_LOCAL_RANK 0..N-1); "worker 1" then
// kills the node's last local rank, and the node's local rank 0 must leave on its own. `env`: more
// settings for every process.
RecoveryRun recoveryJob(const std::vector<std::string>& args, const std::string& metric, const std::string& kill,
                        int sig, int local_size, const Env& env) {
  Cluster c(2, 2);
  for (const auto& [name, value] : env) c.setEnv(name, value);
  std::string weights = c.dir() + "/weights";
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "20");
  // A long timeout: a SIGKILLed node must be declared dead after two missed heartbeats (0.6 s) because
  // its replacement is waiting, not after ZPS_HEARTBEAT_TIMEOUT (checkRecovery checks the log says so).
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "60");
  c.setEnv("ZPS_CHECKPOINT_DIR", c.dir() + "/ckpt");
  c.setEnv("ZPS_CHECKPOINT_EVERY", "10");
  std::vector<std::string> argv = args;
  argv.insert(argv.begin(), "train");
  std::vector<std::string> argv0 = argv;
  argv0.insert(argv0.end(), {"--weights_out", weights});
  if (local_size > 1) {
    c.setEnv("ZPS_LOCAL_SIZE", std::to_string(local_size));
    // Small partitions: the model's pieces spread over both servers and every local rank owns some.
    c.setEnv("ZPS_PARTITION_BYTES", "8192");
  }
  auto startNode = [&](int id, const std::vector<std::string>& node_argv) {
    std::vector<int> ranks;
    for (int l = 0; l < local_size; ++l)
      ranks.push_back(c.startWorker(id, node_argv, {{"ZPS_LOCAL_RANK", std::to_string(l)}}));
    return ranks;
  };
  std::vector<int> keep = {c.startScheduler(), c.startServer()};
  int s1 = c.startServer();
  std::vector<int> node0 = startNode(0, argv0);
  std::vector<int> node1 = startNode(1, argv);
  int w0 = node0[0];
  keep.insert(keep.end(), node0.begin(), node0.end());
  RecoveryRun run;
  int replacement = -1;  // the new server, or the new node's local rank 0
  if (kill == "none") {
    keep.push_back(s1);
    keep.insert(keep.end(), node1.begin(), node1.end());
  } else {
    REQUIRE(c.waitForLog(w0, "Training. Epoch 1,"));
    int victim = kill == "server 1" ? s1 : node1.back();
    c.signal(victim, sig);
    if (kill == "server 1") {
      replacement = c.startServer({{"ZPS_SERVER_ID", "1"}});
      keep.push_back(replacement);
      keep.insert(keep.end(), node1.begin(), node1.end());
    } else {
      std::vector<int> node = startNode(1, argv);
      replacement = node[0];
      keep.insert(keep.end(), node.begin(), node.end());
    }
    c.waitExit(victim, 10s);
    if (kill != "server 1" && local_size > 1) {
      INFO(c.logTail(node1[0]));
      run.killed_peer_code = c.waitExit(node1[0], 10s);
    }
  }
  for (int i : keep) {
    INFO(c.logTail(i));
    REQUIRE(c.waitExit(i, 60s) == 0);
  }
  run.weights = readWeights(weights);
  if (replacement >= 0) run.replacement_log = c.log(replacement);
  run.worker_log = c.log(w0);
  run.scheduler_log = c.log(keep[0]);
  if (local_size > 1) run.peer_log = c.log(node0[1]);
  run.metric = finalMetric(run.worker_log, metric);
  return run;
}

// SIGKILL: the scheduler notices the silence after two heartbeat intervals, since a replacement waits
// for the rank. SIGTERM: the node says goodbye (a server also writes a final shard) and the scheduler
// starts the recovery at once.
// Returns the last recovered run.
RecoveryRun checkRecovery(const std::vector<std::string>& args, const std::string& metric, const std::string& kill,
                          const std::vector<int>& signals, int local_size = 1, const Env& env = {}) {
  RecoveryRun undisturbed = recoveryJob(args, metric, "none", 0, local_size, env);
  RecoveryRun recovered;
  const bool whole_node_killed = kill == "server 1" || local_size == 1;
  for (int sig : signals) {
    recovered = recoveryJob(args, metric, kill, sig, local_size, env);
    INFO(recovered.scheduler_log);
    CHECK(contains(recovered.scheduler_log, "lost " + kill));
    if (sig == SIGKILL && whole_node_killed)
      CHECK(contains(recovered.scheduler_log, "sent no heartbeat for 0.6 s while a replacement waits"));
    CHECK(contains(recovered.scheduler_log, "address book of generation 1 sent"));
    CHECK(contains(recovered.worker_log, "rolling back to the latest checkpoint"));
    CHECK(contains(recovered.worker_log, "resumes from the checkpoint at step"));
    if (local_size > 1) {
      CHECK(contains(recovered.peer_log, "rolling back to the latest checkpoint"));
      CHECK(contains(recovered.peer_log, "resumes from worker 0's checkpoint at step"));
    }
    if (!whole_node_killed) {
      // The killed process's local rank 0 leaves (goodbye), so the scheduler need not wait for silence.
      CHECK(recovered.killed_peer_code != 0);
      CHECK(contains(recovered.scheduler_log, "exited before the job ended"));
    }
    if (kill == "server 1" && std::find(args.begin(), args.end(), "ctr") != args.end())
      CHECK(contains(recovered.replacement_log, "restored table 'train/embedding'"));
    double rel = maxRelativeDifference(undisturbed.weights, recovered.weights);
    std::printf(
        "recovery after %s of %s (local size %d): %s %.4f undisturbed, %.4f recovered; max relative weight "
        "difference %.3g\n",
        strsignal(sig), kill.c_str(), local_size, metric.c_str(), undisturbed.metric, recovered.metric, rel);
    CHECK(rel <= 1e-5);
    CHECK(std::fabs(recovered.metric - undisturbed.metric) <= 0.01);
  }
  return recovered;
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE(
    "train: recovery: a server SIGKILLed (or SIGTERMed) mid-training is replaced, reloads its table shard, and the job "
    "ends like an undisturbed one") {
  checkRecovery({"--model", "ctr", "--data", "synthetic-ctr", "--synthetic_rows", "20000", "--epochs", "4",
                 "--batch_size", "64", "--optimizer", "adam", "--lr", "0.001", "--hidden", "32"},
                "auc", "server 1", {SIGKILL, SIGTERM});
}

TEST_CASE(
    "train: recovery: a worker SIGKILLed mid-training is replaced, catches up, and the job ends like an undisturbed "
    "one") {
  checkRecovery({"--model", "mlp", "--data", "digits", "--epochs", "8", "--batch_size", "16"}, "accuracy", "worker 1",
                {SIGKILL});
}

// Priority scheduling with push lanes: the surviving server forgets worker 0's lane with the old
// generation, which binds it again over the same connection; the replacement gets a new one. Both
// lanes carry the pushes of the rest of the job. The CTR job, since it takes seconds and keeps a table
// shard on server 1 (an 8-epoch MLP on digits ends in under a second on idle cores, before the loss
// is noticed); small partitions spread its dense layers over both servers' lanes.
TEST_CASE(
    "train: recovery with push lanes: a server SIGKILLed mid-training is replaced, every lane opens again, and the "
    "job ends like an undisturbed one") {
  RecoveryRun run = checkRecovery({"--model", "ctr", "--data", "synthetic-ctr", "--synthetic_rows", "20000", "--epochs",
                                   "4", "--batch_size", "64", "--optimizer", "adam", "--lr", "0.001", "--hidden", "32"},
                                  "auc", "server 1", {SIGKILL}, 1,
                                  {{"ZPS_PRIORITY", "1"}, {"ZPS_PUSH_LANE", "1"}, {"ZPS_PARTITION_BYTES", "8192"}});
  INFO(run.worker_log);
  CHECK(occurrences(run.worker_log, "push lanes open to 2 of 2 servers") == 2);  // at the start, after the recovery
  CHECK_FALSE(contains(run.worker_log, "no push lane to"));
}

// Local reduction (2 processes per worker node): every local rank of every node moves to the new
// generation together, and a node that loses one of its processes is replaced as a whole.
TEST_CASE(
    "train: recovery with 2 local ranks per node: a server SIGKILLed mid-training is replaced and the job ends like an "
    "undisturbed one") {
  checkRecovery({"--model", "mlp", "--data", "digits", "--epochs", "8", "--batch_size", "16"}, "accuracy", "server 1",
                {SIGKILL}, 2);
}

// Every local rank declares the table again with the checkpoint's step; the replaced server restores
// its shard once, and the rounds count all 4 processes again.
TEST_CASE(
    "train: recovery with 2 local ranks per node: a server SIGKILLed mid-training is replaced, reloads its table "
    "shard, and the ctr job ends like an undisturbed one") {
  checkRecovery({"--model", "ctr", "--data", "synthetic-ctr", "--synthetic_rows", "20000", "--epochs", "4",
                 "--batch_size", "32", "--optimizer", "adam", "--lr", "0.001", "--hidden", "32"},
                "auc", "server 1", {SIGKILL}, 2);
}

TEST_CASE(
    "train: recovery with 2 local ranks per node: a worker node that loses a process is replaced and the job ends like "
    "an undisturbed one") {
  checkRecovery({"--model", "mlp", "--data", "digits", "--epochs", "8", "--batch_size", "16"}, "accuracy", "worker 1",
                {SIGKILL}, 2);
}

TEST_CASE("train: recovery: a lost node that is not replaced within ZPS_RECOVERY_TIMEOUT fails the job, naming it") {
  Cluster c(2, 2);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "2");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "1.5");
  // Long enough to outlast the heartbeat and recovery timeouts (server 1 may hold none of its keys).
  std::vector<std::string> args = {"train", "--model", "mlp", "--data", "digits", "--epochs", "1000"};
  int s = c.startScheduler();
  c.startServer();
  int s1 = c.startServer();
  int w0 = c.startWorker(0, args);
  int w1 = c.startWorker(1, args);
  REQUIRE(c.waitForLog(w0, "Training. Epoch 1,"));
  c.signal(s1, SIGKILL);
  auto codes = c.waitAll(20s);
  INFO(c.logTail(s));
  for (int i : {s, w0, w1}) CHECK(codes[i] != 0);
  CHECK(contains(c.log(s), "node dead: server 1"));
  CHECK(contains(c.log(s), "no replacement registered within 2 s (ZPS_RECOVERY_TIMEOUT)"));
  CHECK(contains(c.log(w0), "server 1"));
}

TEST_CASE("train: a corrupt checkpoint is a clear error, not silent garbage") {
  Cluster c(1, 1);
  std::string dir = c.dir() + "/ckpt";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/latest") << "7\n";
  std::ofstream(dir + "/dense-step-7.ckpt") << "ZPSCKPT1 but then garbage";
  c.setEnv("ZPS_CHECKPOINT_DIR", dir);
  int s = c.startScheduler();
  c.startServer();
  int w = c.startWorker(0, {"train", "--data", "digits", "--epochs", "1"});
  CHECK(c.waitExit(w, 60s) != 0);
  CHECK(contains(c.log(w), "dense-step-7.ckpt is corrupt"));
  CHECK(c.waitExit(s, 30s) != 0);
}
