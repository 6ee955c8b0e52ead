// `zps train` results a user can trust: divergence stops the job on every worker with one message,
// values float32 cannot hold are refused with file:line, reruns agree bit for bit, and one worker
// takes the very steps of the single-process loop (train/local_trainer.h).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/cluster.h"
#include "train/dataset.h"
#include "train/local_trainer.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

// Starts a scheduler, `servers` servers and `workers` workers running `zps train args...`; returns
// the workers' indices.
std::vector<int> startTrainJob(Cluster& c, int servers, int workers, const std::vector<std::string>& args) {
  c.startScheduler();
  for (int s = 0; s < servers; ++s) c.startServer();
  std::vector<std::string> argv = {"train"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<int> out;
  for (int w = 0; w < workers; ++w) out.push_back(c.startWorker(w, argv));
  return out;
}

// Runs a job to its end (every process must exit 0); returns the workers' "weights checksum" values
// and leaves the final weights in `weights_out`.
std::vector<std::string> checksumsOf(int servers, int workers, std::vector<std::string> args,
                                     const std::string& weights_out) {
  Cluster c(servers, workers);
  args.insert(args.end(), {"--weights_out", weights_out});
  auto ids = startTrainJob(c, servers, workers, args);
  auto codes = c.waitAll(240s);
  std::vector<std::string> sums;
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(c.logTail(static_cast<int>(i)));
    REQUIRE(codes[i] == 0);
  }
  for (int w : ids) {
    std::smatch m;
    const std::string log = c.log(w);
    INFO(log);
    REQUIRE(std::regex_search(log, m, std::regex("weights checksum ([0-9a-f]{16})")));
    sums.push_back(m[1]);
  }
  return sums;
}

std::vector<float> readWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> w(bytes.size() / sizeof(float));
  std::memcpy(w.data(), bytes.data(), w.size() * sizeof(float));
  std::remove(path.c_str());
  return w;
}

}  // namespace

TEST_CASE("train: 4 workers rerun bit-identically and end within 1e-5 of 1 worker on the 4x batch") {
  const std::string base = std::filesystem::temp_directory_path().string() + "/zps-trust-" + std::to_string(::getpid());
  const std::vector<std::string> args = {"--model", "mlp", "--data", "digits", "--epochs", "2"};
  auto with = [&](std::string batch) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--batch_size", batch});
    return a;
  };
  const std::vector<std::string> first = checksumsOf(2, 4, with("8"), base + "-a");
  const std::vector<std::string> second = checksumsOf(2, 4, with("8"), base + "-b");
  checksumsOf(1, 1, with("32"), base + "-one");
  for (size_t w = 0; w < first.size(); ++w) {
    CHECK(first[w] == first[0]);   // every worker holds the same weights
    CHECK(second[w] == first[0]);  // and so does every rerun, whatever order the pushes arrived in
  }
  const std::vector<float> four = readWeights(base + "-a"), rerun = readWeights(base + "-b"),
                           one = readWeights(base + "-one");
  REQUIRE(!four.empty());
  REQUIRE(four.size() == one.size());
  CHECK(four == rerun);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(four[i]) - one[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(one[i])));
  }
  std::printf("4 workers on batch 8 vs 1 worker on batch 32: max relative weight difference %.3g\n", diff / scale);
  CHECK(diff / scale <= 1e-5);
}

TEST_CASE("train: a learning rate that diverges stops every worker at the same step with one clear message") {
  for (const char* model : {"linear", "mlp"}) {
    Cluster c(1, 2);
    const char* data = std::string(model) == "linear" ? "diabetes" : "digits";
    auto workers = startTrainJob(c, 1, 2, {"--model", model, "--data", data, "--epochs", "2", "--lr", "1e30"});
    auto codes = c.waitAll(120s);
    std::string step;  // the step worker 0 stopped at; the other must name the same one
    for (int w : workers) {
      const std::string log = c.log(w);
      INFO(model << "\n" << c.logTail(w));
      CHECK(codes[w] != 0);
      CHECK(contains(log, "training diverged: the summed dense gradient is "));
      CHECK(contains(log, "lower --lr (now 1e+30)"));
      CHECK(!contains(log, "Final test"));
      std::smatch m;
      REQUIRE(std::regex_search(log, m, std::regex("step ([0-9]+) \\(epoch 1\\): training diverged")));
      if (step.empty()) step = m[1];
      CHECK(m[1] == step);
    }
  }
}

// Asynchronous workers check their own gradient, so they need not stop at the same step; whichever
// stops first ends the job, and every worker must still exit non-zero saying why.
TEST_CASE("train: an asynchronous job whose learning rate diverges stops every worker with the message") {
  Cluster c(2, 2);
  c.setEnv("ZPS_ENABLE_ASYNC", "1");
  auto workers = startTrainJob(c, 2, 2, {"--model", "mlp", "--data", "digits", "--epochs", "2", "--lr", "1e30"});
  auto codes = c.waitAll(120s);
  for (int w : workers) {
    const std::string log = c.log(w);
    INFO(c.logTail(w));
    CHECK(codes[w] != 0);
    CHECK(contains(log, "training diverged: "));
    CHECK(contains(log, "lower --lr (now 1e+30)"));
    CHECK(!contains(log, "Final test"));
  }
}

TEST_CASE("train: a data value outside float32's range is refused with file:line on every worker") {
  Cluster c(1, 2);
  const std::string csv = c.dir() + "/huge.csv";
  {
    std::ofstream f(csv);
    f << "x1,x2,y\n";
    for (int i = 0; i < 100; ++i)
      f << i % 7 << "," << (i == 41 ? "1e39" : std::to_string(i % 5)) << "," << i % 3 << "\n";
  }
  auto workers = startTrainJob(c, 1, 2, {"--model", "linear", "--data", "csv:" + csv, "--epochs", "1"});
  auto codes = c.waitAll(60s);
  for (int w : workers) {
    INFO(c.logTail(w));
    // 2, a user error, on the worker that reported first; the other may hear it from the scheduler,
    // which ends the job, and exit 1 with the same message.
    CHECK(codes[w] != 0);
    // Line 43: the header is line 1 and row i is on line i + 2.
    CHECK(contains(c.log(w), "huge.csv:43: column 2: '1e39' is outside float32's range"));
  }
}

// One worker of `zps train` and trainLocal share every step (the same models, embedding steps,
// scaling and optimizers; with one pusher the servers' sums and table updates are exact), so their
// final dense weights are equal bit for bit.
TEST_CASE("train: 1 worker ends with the weights of the single-process loop, bit for bit (mlp, ctr)") {
  struct Case {
    std::string model, data;
    std::vector<size_t> hidden;
    size_t batch;
    uint64_t rows;  // synthetic rows (0: a file dataset)
  };
  for (const Case& k : {Case{"mlp", "digits", {32}, 32, 0}, Case{"ctr", "synthetic-ctr", {16}, 128, 20000}}) {
    INFO(k.model);
    zps::train::LoadOptions lo;
    lo.data_dir = std::getenv("ZPS_DATA_DIR");
    lo.synthetic_rows = k.rows;
    auto split = zps::train::loadDataset(k.data, lo);
    REQUIRE(split.ok());
    zps::train::TrainOptions o;
    o.model = k.model;
    o.hidden = k.hidden;
    o.embedding_dim = 4;
    o.epochs = 1;
    o.batch_size = k.batch;
    o.optimizer.kind = zps::kernels::OptimizerKind::kAdam;
    o.optimizer.lr = 0.003f;
    o.embedding_optimizer.kind = zps::kernels::OptimizerKind::kAdagrad;
    o.embedding_optimizer.lr = 0.1f;
    o.embedding_init_scale = 0.01f;
    auto local = zps::train::trainLocal(*split, o);
    REQUIRE(local.ok());

    const std::string out =
        std::filesystem::temp_directory_path().string() + "/zps-one-" + k.model + "-" + std::to_string(::getpid());
    checksumsOf(1, 1,
                {"--model",
                 k.model,
                 "--data",
                 k.data,
                 "--synthetic_rows",
                 std::to_string(k.rows),
                 "--hidden",
                 std::to_string(k.hidden[0]),
                 "--embedding_dim",
                 "4",
                 "--epochs",
                 "1",
                 "--batch_size",
                 std::to_string(k.batch),
                 "--optimizer",
                 "adam",
                 "--lr",
                 "0.003",
                 "--table_optimizer",
                 "adagrad",
                 "--table_lr",
                 "0.1"},
                out);
    const std::vector<float> distributed = readWeights(out);
    REQUIRE(distributed.size() == local->params.size());
    size_t differ = 0;
    for (size_t i = 0; i < distributed.size(); ++i) differ += distributed[i] != local->params[i];
    CHECK(differ == 0);
  }
}
