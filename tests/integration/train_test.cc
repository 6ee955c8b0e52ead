// `zps train` on loopback clusters: equivalence with single-worker training, convergence on real data,
// CTR against the generator's Bayes-optimal AUC, async, checkpoint/restart and bad input.
#include <signal.h>

#include <unistd.h>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/integration/cluster.h"
#include "worker/train/dataset.h"
#include "worker/train/metrics.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

std::string dataDir() {
  const char* d = std::getenv("ZPS_DATA_DIR");
  return d != nullptr ? d : "data";
}

// Runs a whole training job and returns worker 0's log; every process must exit 0. local_size > 1:
// that many processes per worker node (the caller sets ZPS_LOCAL_SIZE).
std::string trainJob(Cluster& c, int servers, int workers, const std::vector<std::string>& args,
                     std::chrono::seconds deadline = 240s, int local_size = 1) {
  c.startScheduler();
  for (int s = 0; s < servers; ++s) c.startServer();
  std::vector<std::string> argv = {"train"};
  argv.insert(argv.end(), args.begin(), args.end());
  int first = -1;
  for (int w = 0; w < workers; ++w) {
    for (int l = 0; l < local_size; ++l) {
      zps::testing::Env local;
      if (local_size > 1) local = {{"ZPS_LOCAL_RANK", std::to_string(l)}};
      int idx = c.startWorker(w, argv, local);
      if (first < 0) first = idx;
    }
  }
  auto codes = c.waitAll(deadline);
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(c.logTail(static_cast<int>(i)));
    REQUIRE(codes[i] == 0);
  }
  return c.log(first);
}

// The number after "Final test <metric> " in a log.
double finalMetric(const std::string& log, const std::string& metric) {
  std::smatch m;
  std::regex re("Final test [^\\n]*?" + metric + " ([0-9.eE+-]+)");
  INFO(log);
  REQUIRE(std::regex_search(log, m, re));
  return std::stod(m[1]);
}

std::vector<float> readWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> w(bytes.size() / 4);
  std::memcpy(w.data(), bytes.data(), w.size() * 4);
  return w;
}

// max |a - b| / max |a|: the largest difference relative to the scale of the weights.
double maxRelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(a[i])));
  }
  return diff / scale;
}

// local_size 2: the two processes on batch b are the local ranks of one worker node. `extra`: more
// train arguments for both jobs; `metric` (non-empty): both jobs' final test metric must agree too.
void checkEquivalence(const std::string& model, const std::string& data, const std::string& epochs, int local_size = 1,
                      const std::vector<std::string>& extra = {}, const std::string& metric = "") {
  std::string one, two, one_log, two_log;
  auto withExtra = [&](std::vector<std::string> args) {
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  {
    Cluster c(1, 1);
    // Outside the cluster folder, which is removed with the cluster.
    one = std::filesystem::path(c.dir()).parent_path().string() + "/zps-weights-one-" + model + "-" +
          std::to_string(getpid());
    one_log = trainJob(
        c, 1, 1,
        withExtra({"--model", model, "--data", data, "--epochs", epochs, "--batch_size", "32", "--weights_out", one}));
  }
  {
    const int workers = 2 / local_size;
    Cluster c(2, workers);
    if (local_size > 1) {
      c.setEnv("ZPS_LOCAL_SIZE", std::to_string(local_size));
      c.setEnv("ZPS_PARTITION_BYTES", "8192");  // every local rank owns pieces
    }
    two = std::filesystem::path(c.dir()).parent_path().string() + "/zps-weights-two-" + model + "-" +
          std::to_string(getpid());
    two_log = trainJob(
        c, 2, workers,
        withExtra({"--model", model, "--data", data, "--epochs", epochs, "--batch_size", "16", "--weights_out", two}),
        240s, local_size);
  }
  auto a = readWeights(one), b = readWeights(two);
  std::remove(one.c_str());
  std::remove(two.c_str());
  double rel = maxRelativeDifference(a, b);
  std::printf("equivalence %s on %s (local size %d): %zu weights, max relative difference %.3g\n", model.c_str(),
              data.c_str(), local_size, a.size(), rel);
  CHECK(rel <= 1e-4);
  if (!metric.empty()) {
    const double m1 = finalMetric(one_log, metric), m2 = finalMetric(two_log, metric);
    std::printf("equivalence %s on %s (local size %d): test %s %.6f vs %.6f\n", model.c_str(), data.c_str(), local_size,
                metric.c_str(), m1, m2);
    CHECK(std::fabs(m1 - m2) <= 1e-4);
  }
}

}  // namespace

TEST_CASE("train: 2 workers on batch b end with the weights of 1 worker on batch 2b (linear)") {
  checkEquivalence("linear", "diabetes", "5");
}

TEST_CASE("train: 2 workers on batch b end with the weights of 1 worker on batch 2b (mlp)") {
  checkEquivalence("mlp", "digits", "3");
}

TEST_CASE("train: 1 node of 2 local ranks on batch b ends with the weights of 1 worker on batch 2b (mlp)") {
  checkEquivalence("mlp", "digits", "3", 2);
}

// The embedding rows live on the servers: every local rank pulls and pushes its own rows, and a round
// sums both local ranks' row gradients (in another association than one worker's sum: rounding only).
TEST_CASE("train: 1 node of 2 local ranks on batch b ends with the weights of 1 worker on batch 2b (ctr)") {
  checkEquivalence("ctr", "synthetic-ctr", "2", 2, {"--synthetic_rows", "20000", "--hidden", "32"}, "auc");
}

TEST_CASE("train: every synchronous worker ends with bit-identical weights") {
  Cluster c(2, 3);
  c.startScheduler();
  c.startServer();
  c.startServer();
  std::vector<int> w;
  for (int i = 0; i < 3; ++i) w.push_back(c.startWorker(i, {"train", "--data", "digits", "--epochs", "2"}));
  auto codes = c.waitAll(120s);
  for (int code : codes) REQUIRE(code == 0);
  std::regex re("weights checksum ([0-9a-f]+)");
  std::smatch m0, m;
  std::string l0 = c.log(w[0]);
  REQUIRE(std::regex_search(l0, m0, re));
  for (int i : w) {
    std::string l = c.log(i);
    REQUIRE(std::regex_search(l, m, re));
    CHECK(m[1] == m0[1]);
  }
}

TEST_CASE("train: digits mlp on 2 servers x 2 workers reaches test accuracy >= 0.95") {
  Cluster c(2, 2);
  std::string log = trainJob(c, 2, 2, {"--model", "mlp", "--data", "digits", "--epochs", "10"});
  CHECK(contains(log, "Training. Epoch 10, train loss: "));
  CHECK(finalMetric(log, "accuracy") >= 0.95);
}

TEST_CASE("train: breast_cancer on 2 servers x 2 workers reaches test accuracy >= 0.94") {
  Cluster c(2, 2);
  std::string log = trainJob(c, 2, 2,
                             {"--model", "mlp", "--data", "breast_cancer", "--epochs", "20", "--batch_size", "16",
                              "--hidden", "32", "--lr", "0.02"});
  CHECK(finalMetric(log, "accuracy") >= 0.94);
}

TEST_CASE("train: diabetes linear test MSE within 10% of closed-form least squares") {
  zps::train::LoadOptions lo;
  lo.data_dir = dataDir();
  auto split = zps::train::loadDataset("diabetes", lo);
  REQUIRE(split.ok());
  double closed = zps::train::leastSquaresTestMse(split->train, split->test);
  Cluster c(2, 2);
  std::string log = trainJob(c, 2, 2,
                             {"--model", "linear", "--data", "diabetes", "--epochs", "30", "--batch_size", "16",
                              "--optimizer", "momentum", "--lr", "0.01"});
  double mse = finalMetric(log, "mse");
  std::printf("diabetes: zps linear test MSE %.2f, closed form %.2f (ratio %.4f)\n", mse, closed, mse / closed);
  CHECK(mse <= closed * 1.10);
}

TEST_CASE("train: CTR on synthetic data gets within 0.02 of the Bayes AUC, server bytes follow rows touched") {
  zps::train::LoadOptions lo;
  lo.data_dir = dataDir();
  auto split = zps::train::loadDataset("synthetic-ctr", lo);
  REQUIRE(split.ok());
  const auto& test = split->test;
  double bayes = zps::train::rocAuc(test.true_probability.data(), test.labels.data(), test.rows);
  Cluster c(2, 2);
  c.startScheduler();
  int s0 = c.startServer();
  int s1 = c.startServer();
  std::vector<std::string> args = {
      "train",       "--model", "ctr",  "--data", "synthetic-ctr", "--epochs", "3",          "--batch_size", "256",
      "--optimizer", "adam",    "--lr", "0.001",  "--hidden",      "64,32",    "--table_lr", "0.1"};
  int w0 = c.startWorker(0, args);
  c.startWorker(1, args);
  auto codes = c.waitAll(300s);
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(c.logTail(static_cast<int>(i)));
    REQUIRE(codes[i] == 0);
  }
  double auc = finalMetric(c.log(w0), "auc");
  std::printf("ctr: test AUC %.4f, Bayes-optimal %.4f\n", auc, bayes);
  CHECK(auc >= bayes - 0.02);
  // Each server moves (rows pulled + rows pushed) x (8-byte key + dim floats): nothing scales with the
  // table size.
  std::regex re("param tables: (\\d+) rows held, (\\d+) rows pulled, (\\d+) rows pushed, (\\d+) bytes moved");
  for (int s : {s0, s1}) {
    std::string log = c.log(s);
    std::smatch m;
    INFO(log);
    REQUIRE(std::regex_search(log, m, re));
    uint64_t held = std::stoull(m[1]), pulled = std::stoull(m[2]), pushed = std::stoull(m[3]),
             bytes = std::stoull(m[4]);
    std::printf("server: %llu rows held, %llu pulled, %llu pushed, %llu bytes moved\n",
                static_cast<unsigned long long>(held), static_cast<unsigned long long>(pulled),
                static_cast<unsigned long long>(pushed), static_cast<unsigned long long>(bytes));
    CHECK(bytes == (pulled + pushed) * (8 + 8 * 4));
    CHECK(held > 0);
  }
}

// 2 servers x 2 nodes x 2 local ranks on batch b against 2 x 2 on batch 2b (the same global batch):
// the tables' rounds count all 4 processes, and the model is as good.
TEST_CASE("train: CTR on 2 nodes x 2 local ranks reaches the AUC of 2 workers within 0.005") {
  const std::vector<std::string> args = {"--model",     "ctr",  "--data", "synthetic-ctr", "--epochs", "3",
                                         "--optimizer", "adam", "--lr",   "0.001",         "--hidden", "64,32",
                                         "--table_lr",  "0.1"};
  auto withBatch = [&](const std::string& batch) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--batch_size", batch});
    return a;
  };
  double workers_auc = 0, local_auc = 0;
  {
    Cluster c(2, 2);
    workers_auc = finalMetric(trainJob(c, 2, 2, withBatch("256")), "auc");
  }
  {
    Cluster c(2, 2);
    c.setEnv("ZPS_LOCAL_SIZE", "2");
    local_auc = finalMetric(trainJob(c, 2, 2, withBatch("128"), 240s, 2), "auc");
  }
  std::printf("ctr: test AUC %.4f on 2 workers, %.4f on 2 nodes x 2 local ranks\n", workers_auc, local_auc);
  CHECK(std::fabs(local_auc - workers_auc) <= 0.005);
}

// Duplicated and resent row pushes of every (node, local rank) must count once per round: with the
// sums in a fixed order, the run under faults ends with exactly the fault-free weights.
TEST_CASE(
    "train: CTR on 2 nodes x 2 local ranks under injected drops, duplicates and delays applies each row push exactly "
    "once") {
  auto run = [](bool faults) {
    Cluster c(2, 2);
    c.setEnv("ZPS_LOCAL_SIZE", "2");
    if (faults) {
      c.setEnv("ZPS_TEST_FAULTS", "drop=0.02,dup=0.1,delay=0.05");
      c.setEnv("ZPS_RESEND_TIMEOUT", "0.2");
    }
    const std::string weights = c.dir() + "/weights";
    std::string log = trainJob(
        c, 2, 2,
        {"--model", "ctr", "--data", "synthetic-ctr", "--synthetic_rows", "2500", "--epochs", "1", "--batch_size", "32",
         "--optimizer", "adam", "--lr", "0.001", "--hidden", "32", "--weights_out", weights},
        240s, 2);
    if (faults) {
      CHECK(contains(log, "injected"));
      // Local rank 0 says goodbye for its node and still reports its own resends.
      CHECK(std::regex_search(log, std::regex("worker 0 local rank 0: resent [1-9][0-9]* requests")));
    }
    return readWeights(weights);
  };
  const std::vector<float> clean = run(false), faulty = run(true);
  REQUIRE(!clean.empty());
  std::printf("ctr with 2 local ranks: %zu weights, max relative difference under faults %.3g\n", clean.size(),
              maxRelativeDifference(clean, faulty));
  CHECK(faulty == clean);
}

TEST_CASE("train: async digits converges to test accuracy >= 0.93") {
  Cluster c(2, 2);
  c.setEnv("ZPS_ENABLE_ASYNC", "1");
  std::string log = trainJob(c, 2, 2, {"--model", "mlp", "--data", "digits", "--epochs", "10"});
  CHECK(finalMetric(log, "accuracy") >= 0.93);
}

TEST_CASE("train: a cluster killed after epoch 2 resumes from its checkpoint and ends like an uninterrupted run") {
  std::vector<std::string> args = {"train",
                                   "--model",
                                   "ctr",
                                   "--data",
                                   "synthetic-ctr",
                                   "--synthetic_rows",
                                   "40000",
                                   "--epochs",
                                   "4",
                                   "--batch_size",
                                   "128",
                                   "--optimizer",
                                   "adam",
                                   "--lr",
                                   "0.001",
                                   "--hidden",
                                   "32"};
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

// local_size > 1: every worker node runs that many processes (ZPS_LOCAL_RANK 0..N-1); "worker 1" then
// kills the node's last local rank, and the node's local rank 0 must leave on its own.
RecoveryRun recoveryJob(const std::vector<std::string>& args, const std::string& metric, const std::string& kill,
                        int sig, int local_size = 1) {
  Cluster c(2, 2);
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
void checkRecovery(const std::vector<std::string>& args, const std::string& metric, const std::string& kill,
                   const std::vector<int>& signals, int local_size = 1) {
  RecoveryRun undisturbed = recoveryJob(args, metric, "none", 0, local_size);
  const bool whole_node_killed = kill == "server 1" || local_size == 1;
  for (int sig : signals) {
    RecoveryRun recovered = recoveryJob(args, metric, kill, sig, local_size);
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

TEST_CASE("train: bad input gives a clear error, a non-zero exit, and no process hangs") {
  Cluster scratch(1, 1);
  std::string bad_csv = scratch.dir() + "/bad.csv";
  std::ofstream(bad_csv) << "1,2,3\n4,5,6\n7,oops,9\n";
  std::string empty_csv = scratch.dir() + "/empty.csv";
  std::ofstream(empty_csv) << "a,b,label\n";
  std::string three = scratch.dir() + "/three.csv";
  std::string four = scratch.dir() + "/four.csv";
  {
    std::ofstream t(three), f(four);
    for (int i = 0; i < 200; ++i) {
      t << i % 7 << "," << i % 5 << "," << (i % 3) * 1.5 << "\n";
      f << i % 7 << "," << i % 5 << "," << i % 2 << "," << (i % 3) * 1.5 << "\n";
    }
  }
  struct Case {
    std::vector<std::string> w0, w1;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"--model", "linear", "--data", "csv:" + bad_csv}, {}, "bad.csv:3"},
      {{"--model", "resnet", "--data", "digits"}, {}, "resnet"},
      {{"--model", "linear", "--data", "csv:" + empty_csv}, {}, "no data rows"},
      {{"--model", "linear", "--data", "csv:" + three},
       {"--model", "linear", "--data", "csv:" + four},
       "differ in shape"},
  };
  for (const auto& tc : cases) {
    Cluster c(1, 2);
    int s = c.startScheduler();
    int srv = c.startServer();
    std::vector<std::string> a = {"train", "--epochs", "1"}, b = a;
    a.insert(a.end(), tc.w0.begin(), tc.w0.end());
    const auto& second = tc.w1.empty() ? tc.w0 : tc.w1;
    b.insert(b.end(), second.begin(), second.end());
    int w0 = c.startWorker(0, a);
    int w1 = c.startWorker(1, b);
    auto codes = c.waitAll(60s);
    INFO(tc.message << "\n" << c.logTail(w0) << c.logTail(s));
    CHECK(codes[w0] != 0);
    CHECK(codes[w1] != 0);
    CHECK(codes[s] != 0);
    CHECK(codes[srv] != 0);
    CHECK((contains(c.log(w0), tc.message) || contains(c.log(w1), tc.message)));
    CHECK(contains(c.log(s), tc.message));
  }
}
