// Tests for the metrics (train/metrics.h): known values, AUC ties against a brute-force pair
// count, and the closed-form least-squares reference.
#include "train/metrics.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

namespace zps::train {
namespace {

TEST_CASE("mean squared error and accuracy", "[train][metrics]") {
  const std::vector<float> pred{1, 2, 3}, target{1, 4, 0};
  CHECK(meanSquaredError(pred.data(), target.data(), 3) == Approx((0 + 4 + 9) / 3.0));
  CHECK(std::isnan(meanSquaredError(pred.data(), target.data(), 0)));

  // 3 rows x 3 classes; the second row ties classes 0 and 2 (the first wins).
  const std::vector<float> probs{0.1f, 0.7f, 0.2f, 0.4f, 0.2f, 0.4f, 0.3f, 0.3f, 0.4f};
  CHECK(accuracy(probs.data(), 3, std::vector<float>{1, 0, 2}.data(), 3) == Approx(1.0));
  CHECK(accuracy(probs.data(), 3, std::vector<float>{1, 2, 0}.data(), 3) == Approx(1.0 / 3));
  CHECK(std::isnan(accuracy(probs.data(), 3, nullptr, 0)));
}

TEST_CASE("roc auc: known values and ties", "[train][metrics]") {
  // scikit-learn's roc_auc_score example.
  const std::vector<float> y{0, 0, 1, 1};
  CHECK(rocAuc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}.data(), y.data(), 4) == Approx(0.75));
  CHECK(rocAuc(std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}.data(), y.data(), 4) == Approx(1.0));
  CHECK(rocAuc(std::vector<float>{0.4f, 0.3f, 0.2f, 0.1f}.data(), y.data(), 4) == Approx(0.0));
  // All tied: every pair counts one half.
  CHECK(rocAuc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}.data(), y.data(), 4) == Approx(0.5));
  // A tie between a positive and negatives: (0.5 + 0.5 + 1 + 1) / 4.
  CHECK(rocAuc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.9f}.data(), std::vector<float>{0, 1, 0, 1}.data(), 4) ==
        Approx(0.75));
  // One class only, or a NaN score: undefined.
  CHECK(std::isnan(rocAuc(std::vector<float>{0.1f, 0.2f}.data(), std::vector<float>{1, 1}.data(), 2)));
  CHECK(std::isnan(rocAuc(std::vector<float>{NAN, 0.2f}.data(), std::vector<float>{0, 1}.data(), 2)));
}

TEST_CASE("roc auc matches a brute-force pair count on tied data", "[train][metrics]") {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> level(0, 9);  // few distinct scores: many ties
  std::bernoulli_distribution coin(0.3);
  const size_t n = 500;
  std::vector<float> scores(n), labels(n);
  for (size_t i = 0; i < n; ++i) {
    labels[i] = coin(gen) ? 1.0f : 0.0f;
    scores[i] = 0.1f * static_cast<float>(level(gen)) + 0.05f * labels[i] * static_cast<float>(coin(gen));
  }
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < n; ++i) {
    if (labels[i] != 1.0f) continue;
    for (size_t j = 0; j < n; ++j) {
      if (labels[j] != 0.0f) continue;
      pairs += 1;
      wins += scores[i] > scores[j] ? 1.0 : scores[i] == scores[j] ? 0.5 : 0.0;
    }
  }
  CHECK(rocAuc(scores.data(), labels.data(), n) == Approx(wins / pairs).epsilon(1e-12));
}

TEST_CASE("log loss with clipping", "[train][metrics]") {
  CHECK(logLoss(std::vector<float>{0.5f, 0.5f}.data(), std::vector<float>{0, 1}.data(), 2) == Approx(std::log(2.0)));
  CHECK(logLoss(std::vector<float>{0.9f, 0.2f}.data(), std::vector<float>{1, 0}.data(), 2) ==
        Approx(-(std::log(0.9) + std::log(0.8)) / 2).epsilon(1e-6));
  // A confident mistake costs -log(1e-7), not infinity.
  CHECK(logLoss(std::vector<float>{0.0f}.data(), std::vector<float>{1}.data(), 1) == Approx(-std::log(1e-7)));
}

Dataset regressionData(size_t rows, size_t features, double noise, uint64_t seed, bool collinear) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> normal;
  Dataset d;
  d.rows = rows;
  d.num_numeric = features;
  for (size_t r = 0; r < rows; ++r) {
    double y = 3.0;
    for (size_t j = 0; j < features; ++j) {
      double x = normal(gen);
      if (collinear && j == 1) x = d.numeric[r * features];  // column 1 == column 0
      d.numeric.push_back(static_cast<float>(x));
      y += (j + 1.0) * x;
    }
    d.labels.push_back(static_cast<float>(y + noise * normal(gen)));
  }
  return d;
}

TEST_CASE("least squares: exact fits and the noise floor", "[train][metrics]") {
  const Dataset train = regressionData(200, 4, 0.0, 1, false);
  const Dataset test = regressionData(50, 4, 0.0, 2, false);
  CHECK(leastSquaresTestMse(train, test) < 1e-8);

  // With noise sd 0.5 the test MSE is about 0.25 (plus a little estimation error).
  const Dataset noisy_train = regressionData(2000, 4, 0.5, 3, false);
  const Dataset noisy_test = regressionData(2000, 4, 0.5, 4, false);
  CHECK(leastSquaresTestMse(noisy_train, noisy_test) == Approx(0.25).epsilon(0.1));

  // Collinear columns: still a finite answer that fits the data.
  const Dataset col_train = regressionData(100, 3, 0.0, 5, true);
  const Dataset col_test = regressionData(20, 3, 0.0, 6, true);
  const double mse = leastSquaresTestMse(col_train, col_test);
  CHECK(std::isfinite(mse));
  CHECK(mse < 1e-4);
}

TEST_CASE("evaluateOutputs picks the metrics of the task", "[train][metrics]") {
  Dataset reg;
  reg.rows = 2;
  reg.labels = {1, 3};
  Evaluation r = evaluateOutputs(reg, std::vector<float>{2, 3}.data(), 1, 0.5);
  CHECK(r.mse == Approx(0.5));
  CHECK(std::isnan(r.accuracy));
  CHECK(r.summary() == "mse 0.5000");

  Dataset bin;
  bin.rows = 4;
  bin.num_classes = 2;
  bin.labels = {0, 0, 1, 1};
  // One output per row (P(1), as ctr gives) and two (class probabilities, as mlp gives) agree.
  const std::vector<float> p1{0.1f, 0.4f, 0.35f, 0.8f};
  const std::vector<float> both{0.9f, 0.1f, 0.6f, 0.4f, 0.65f, 0.35f, 0.2f, 0.8f};
  Evaluation a = evaluateOutputs(bin, p1.data(), 1, 0);
  Evaluation b = evaluateOutputs(bin, both.data(), 2, 0);
  CHECK(a.auc == Approx(0.75));
  CHECK(b.auc == Approx(0.75));
  CHECK(a.accuracy == Approx(0.75));
  CHECK(b.accuracy == Approx(0.75));
  CHECK(a.logloss == Approx(b.logloss).epsilon(1e-6));
  CHECK(std::isnan(a.mse));
  CHECK_THAT(a.summary(), Catch::StartsWith("auc 0.7500 logloss"));

  Dataset multi;
  multi.rows = 1;
  multi.num_classes = 3;
  multi.labels = {2};
  Evaluation m = evaluateOutputs(multi, std::vector<float>{0.1f, 0.2f, 0.7f}.data(), 3, 0);
  CHECK(m.accuracy == 1.0);
  CHECK(std::isnan(m.auc));
  CHECK(m.summary() == "accuracy 1.0000");

  // A model that diverged outputs NaN: the summary still names the task's metric.
  const float nan = std::nanf("");
  CHECK(evaluateOutputs(reg, std::vector<float>{nan, nan}.data(), 1, nan).summary() == "mse nan");
  CHECK_THAT(evaluateOutputs(bin, std::vector<float>(4, nan).data(), 1, nan).summary(), Catch::StartsWith("auc nan"));
}

}  // namespace
}  // namespace zps::train
