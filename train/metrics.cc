#include "train/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <vector>

namespace zps::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Solves the symmetric positive definite system a x = b (a is d x d, overwritten) by Cholesky.
// Returns false when a is not positive definite (collinear features).
bool choleskySolve(std::vector<double>& a, std::vector<double>& b, size_t d) {
  for (size_t j = 0; j < d; ++j) {
    double s = a[j * d + j];
    for (size_t k = 0; k < j; ++k) s -= a[j * d + k] * a[j * d + k];
    if (!(s > 0)) return false;
    const double l = std::sqrt(s);
    a[j * d + j] = l;
    for (size_t i = j + 1; i < d; ++i) {
      double t = a[i * d + j];
      for (size_t k = 0; k < j; ++k) t -= a[i * d + k] * a[j * d + k];
      a[i * d + j] = t / l;
    }
  }
  for (size_t i = 0; i < d; ++i) {  // L y = b
    double t = b[i];
    for (size_t k = 0; k < i; ++k) t -= a[i * d + k] * b[k];
    b[i] = t / a[i * d + i];
  }
  for (size_t i = d; i-- > 0;) {  // L^T x = y
    double t = b[i];
    for (size_t k = i + 1; k < d; ++k) t -= a[k * d + i] * b[k];
    b[i] = t / a[i * d + i];
  }
  return true;
}

}  // namespace

double meanSquaredError(const float* pred, const float* target, size_t n) {
  if (n == 0) return kNaN;
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(pred[i]) - target[i];
    s += d * d;
  }
  return s / static_cast<double>(n);
}

double accuracy(const float* probs, size_t classes, const float* labels, size_t n) {
  if (n == 0 || classes == 0) return kNaN;
  size_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    const float* p = probs + i * classes;
    const size_t best = static_cast<size_t>(std::max_element(p, p + classes) - p);
    if (static_cast<float>(best) == labels[i]) ++correct;
  }
  return static_cast<double>(correct) / static_cast<double>(n);
}

double rocAuc(const float* scores, const float* labels, size_t n) {
  size_t positives = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(scores[i])) return kNaN;
    if (labels[i] > 0.5f) ++positives;
  }
  const size_t negatives = n - positives;
  if (positives == 0 || negatives == 0) return kNaN;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  double rank_sum = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    size_t pos_in_group = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      if (labels[order[j]] > 0.5f) ++pos_in_group;
      ++j;
    }
    const double avg_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    rank_sum += avg_rank * static_cast<double>(pos_in_group);
    i = j;
  }
  const double p = static_cast<double>(positives);
  const double u = rank_sum - p * (p + 1) / 2.0;
  return u / (p * static_cast<double>(negatives));
}

double logLoss(const float* probs, const float* labels, size_t n) {
  if (n == 0) return kNaN;
  constexpr double kEps = 1e-7;
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double p = std::clamp(static_cast<double>(probs[i]), kEps, 1.0 - kEps);
    s -= labels[i] > 0.5f ? std::log(p) : std::log(1.0 - p);
  }
  return s / static_cast<double>(n);
}

double leastSquaresTestMse(const Dataset& train, const Dataset& test) {
  const size_t f = train.num_numeric;
  const size_t d = f + 1;  // features, then the bias
  std::vector<double> ata(d * d, 0.0), atb(d, 0.0), row(d);
  for (size_t r = 0; r < train.rows; ++r) {
    const float* x = train.numericRow(r);
    for (size_t j = 0; j < f; ++j) row[j] = x[j];
    row[f] = 1.0;
    for (size_t i = 0; i < d; ++i) {
      for (size_t j = 0; j <= i; ++j) ata[i * d + j] += row[i] * row[j];
      atb[i] += row[i] * train.labels[r];
    }
  }
  for (size_t i = 0; i < d; ++i) {
    for (size_t j = i + 1; j < d; ++j) ata[i * d + j] = ata[j * d + i];
  }
  std::vector<double> w = atb, a = ata;
  if (!choleskySolve(a, w, d)) {
    // Collinear features: the minimum-norm-like answer of a vanishing ridge is as good a reference.
    double trace = 0;
    for (size_t i = 0; i < d; ++i) trace += ata[i * d + i];
    a = ata;
    w = atb;
    for (size_t i = 0; i < d; ++i) a[i * d + i] += 1e-9 * trace / static_cast<double>(d);
    if (!choleskySolve(a, w, d)) return kNaN;
  }
  if (test.rows == 0) return kNaN;
  double s = 0;
  for (size_t r = 0; r < test.rows; ++r) {
    const float* x = test.numericRow(r);
    double y = w[f];
    for (size_t j = 0; j < f; ++j) y += w[j] * x[j];
    const double e = y - test.labels[r];
    s += e * e;
  }
  return s / static_cast<double>(test.rows);
}

std::string Evaluation::summary() const {
  char buf[160];
  if (kind == Kind::kRegression) {
    std::snprintf(buf, sizeof(buf), "mse %.4f", mse);
  } else if (kind == Kind::kBinary) {
    std::snprintf(buf, sizeof(buf), "auc %.4f logloss %.4f accuracy %.4f", auc, logloss, accuracy);
  } else {
    std::snprintf(buf, sizeof(buf), "accuracy %.4f", accuracy);
  }
  return buf;
}

Evaluation evaluateOutputs(const Dataset& data, const float* outputs, size_t per_row, double loss) {
  Evaluation e;
  e.rows = data.rows;
  e.loss = loss;
  e.mse = e.accuracy = e.auc = e.logloss = kNaN;
  if (data.isRegression()) {
    e.kind = Evaluation::Kind::kRegression;
    if (per_row == 1) e.mse = meanSquaredError(outputs, data.labels.data(), data.rows);
    return e;
  }
  if (data.num_classes == 2 && (per_row == 1 || per_row == 2)) {
    e.kind = Evaluation::Kind::kBinary;
    // P(class 1) per row, whether the model gives one probability or both.
    std::vector<float> p1(data.rows);
    std::vector<float> both(data.rows * 2);
    for (size_t r = 0; r < data.rows; ++r) {
      p1[r] = per_row == 1 ? outputs[r] : outputs[r * 2 + 1];
      both[r * 2] = 1.0f - p1[r];
      both[r * 2 + 1] = p1[r];
    }
    e.auc = rocAuc(p1.data(), data.labels.data(), data.rows);
    e.logloss = logLoss(p1.data(), data.labels.data(), data.rows);
    e.accuracy = per_row == 2 ? accuracy(outputs, 2, data.labels.data(), data.rows)
                              : accuracy(both.data(), 2, data.labels.data(), data.rows);
    return e;
  }
  if (per_row == static_cast<size_t>(data.num_classes)) {
    e.accuracy = accuracy(outputs, per_row, data.labels.data(), data.rows);
  }
  return e;
}

}  // namespace zps::train
