// The training defaults (train/defaults.h) against the targets they were chosen for, seed by
// seed over seeds 1-5, in the single-process loop that `zps train` keeps step for step (one worker
// gives the same weights bit for bit). Each case prints its seed table; docs/training.md quotes it.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "train/dataset.h"
#include "train/defaults.h"
#include "train/local_trainer.h"
#include "train/metrics.h"

namespace zps::train {
namespace {

std::string dataDir() {
  if (const char* e = std::getenv("ZPS_DATA_DIR"); e != nullptr && *e != '\0') return e;
  return std::string(ZPS_SOURCE_DIR) + "/data";
}

// What `zps train --model M --data D --seed S` runs with no tuning flags (one worker).
TrainOptions defaultsFor(const std::string& model, uint64_t seed) {
  TrainOptions o;
  o.model = model;
  if (model == "mlp") o.hidden = {kDefaultHidden};
  o.epochs = kDefaultEpochs;
  o.batch_size = kDefaultBatchSize;
  o.optimizer.kind = defaultOptimizer(model);
  o.optimizer.lr = defaultLr(o.optimizer.kind);
  o.seed = seed;
  return o;
}

// One number per seed 1-5: test accuracy, or for regression test MSE / least-squares test MSE.
std::vector<double> seedTable(const std::string& data, const std::string& model, int epochs = kDefaultEpochs,
                              float lr = 0) {
  std::vector<double> out;
  std::ostringstream line;
  line << data << " " << model << " (epochs " << epochs << "):";
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    LoadOptions lo;
    lo.data_dir = dataDir();
    lo.seed = seed;
    auto split = loadDataset(data, lo);
    if (!split.ok()) FAIL(split.status().toString() << " (run tools/fetch-datasets.sh or set ZPS_DATA_DIR)");
    TrainOptions o = defaultsFor(model, seed);
    o.epochs = epochs;
    if (lr > 0) o.optimizer.lr = lr;
    auto r = trainLocal(*split, o);
    if (!r.ok()) FAIL(r.status().toString());
    const double v =
        split->train.isRegression() ? r->test.mse / leastSquaresTestMse(split->train, split->test) : r->test.accuracy;
    out.push_back(v);
    line << " " << v;
  }
  WARN(line.str());
  return out;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

TEST_CASE("defaults: digits mlp, mean test accuracy >= 0.97 and every seed >= 0.96", "[train][defaults]") {
  const std::vector<double> acc = seedTable("digits", "mlp");
  CHECK(mean(acc) >= 0.97);
  CHECK(*std::min_element(acc.begin(), acc.end()) >= 0.96);
}

TEST_CASE("defaults: breast_cancer mlp, mean test accuracy >= 0.97", "[train][defaults]") {
  CHECK(mean(seedTable("breast_cancer", "mlp")) >= 0.97);
}

TEST_CASE("defaults: diabetes linear, test MSE within 5% of least squares on every seed", "[train][defaults]") {
  const std::vector<double> ratio = seedTable("diabetes", "linear");
  CHECK(*std::max_element(ratio.begin(), ratio.end()) <= 1.05);
}

TEST_CASE("logreg: digits mean test accuracy >= 0.96 (30 epochs, adam lr 0.01)", "[train][defaults]") {
  CHECK(mean(seedTable("digits", "logreg", 30, 0.01f)) >= 0.96);
}

}  // namespace
}  // namespace zps::train
