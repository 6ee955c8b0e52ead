// `zps train` results a user can trust: divergence stops the job on every worker with one message,
// values float32 cannot hold are refused with file:line, and reruns agree bit for bit.
#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/integration/cluster.h"

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

}  // namespace

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

TEST_CASE("train: a data value outside float32's range is refused with file:line on every worker") {
  Cluster c(1, 2);
  const std::string csv = c.dir() + "/huge.csv";
  {
    std::ofstream f(csv);
    f << "x1,x2,y\n";
    for (int i = 0; i < 100; ++i) f << i % 7 << "," << (i == 41 ? "1e39" : std::to_string(i % 5)) << "," << i % 3 << "\n";
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
