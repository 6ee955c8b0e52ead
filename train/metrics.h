// Metrics over model outputs, and the closed-form least-squares reference for regression. Pure
// functions of their inputs, safe from any thread; every sum runs in a fixed order in double, so
// the same inputs give the same numbers on every worker.
#pragma once

#include <cstddef>
#include <string>

#include "train/dataset.h"

namespace zps::train {

// Mean of (pred - target)^2. NaN when n == 0.
double meanSquaredError(const float* pred, const float* target, size_t n);

// Share of rows whose largest probability (the first one on ties) is at the label's class. `probs`
// holds n x classes values. NaN when n == 0.
double accuracy(const float* probs, size_t classes, const float* labels, size_t n);

// Area under the ROC curve of `scores` against labels (> 0.5 is positive): the probability that a
// random positive scores above a random negative, ties counting one half (average ranks,
// Mann-Whitney U). NaN when either class is absent or a score is NaN.
double rocAuc(const float* scores, const float* labels, size_t n);

// Binary cross-entropy: mean of -(t log p + (1 - t) log(1 - p)), p = P(label 1) clipped to
// [1e-7, 1 - 1e-7] (float's resolution, so one confident mistake costs ~16 nats, not infinity).
double logLoss(const float* probs, const float* labels, size_t n);

// Least squares with a bias, solved in closed form (normal equations in double, Cholesky) on
// `train`; returns the MSE of that fit on `test`. The reference the trained linear model is judged
// against.
double leastSquaresTestMse(const Dataset& train, const Dataset& test);

// The metrics of a model's outputs on a dataset (outputs as from Model::predict, per_row per row).
// Regression: mse. Classification: accuracy; binary (2 classes, or 1 output = P(1)) also auc and
// logloss. Metrics that do not apply are NaN. `loss` is the mean model loss when the caller knows
// it.
struct Evaluation {
  enum class Kind { kRegression, kBinary, kMulticlass };
  Kind kind = Kind::kMulticlass;  // which metrics the summary reports, from the data's task
  size_t rows = 0;
  double loss = 0;
  double mse = 0;
  double accuracy = 0;
  double auc = 0;
  double logloss = 0;

  // The headline, named by the task even when a value is NaN: "mse 2841.5", "accuracy 0.9667",
  // "auc 0.7812 logloss 0.4705 accuracy 0.80".
  std::string summary() const;
};
Evaluation evaluateOutputs(const Dataset& data, const float* outputs, size_t per_row, double loss);

}  // namespace zps::train
