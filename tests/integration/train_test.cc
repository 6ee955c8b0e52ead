// `zps train` on loopback clusters: equivalence with single-worker training, convergence on real data,
// CTR against the generator's Bayes-optimal AUC, async and bad input. Checkpoints and recovery are in
// train_recovery_test.cc.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"
#include "train/dataset.h"
#include "train/metrics.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::dataDir;
using zps::testing::finalMetric;
using zps::testing::maxRelativeDifference;
using zps::testing::readWeights;
using zps::testing::trainJob;
using namespace std::chrono_literals;

namespace {

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
      "train",   "--model",     "ctr",  "--data", "synthetic-ctr", "--epochs", "3",     "--batch_size",
      "256",     "--optimizer", "adam", "--lr",   "0.001",         "--hidden", "64,32", "--table_optimizer",
      "adagrad", "--table_lr",  "0.1"};
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
  const std::vector<std::string> args = {
      "--model", "ctr",   "--data",   "synthetic-ctr", "--epochs",          "3",       "--optimizer", "adam",
      "--lr",    "0.001", "--hidden", "64,32",         "--table_optimizer", "adagrad", "--table_lr",  "0.1"};
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
