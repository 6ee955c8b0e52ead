// The synthetic datasets of train/dataset.h: deterministic generators of regression rows
// and Criteo-like CTR rows whose click probability is known (true_probability).
#include <cmath>
#include <cstdint>
#include <vector>

#include "train/dataset.h"
#include "train/dataset_progress.h"
#include "train/random.h"

namespace zps::train {

Dataset makeSyntheticRegression(size_t rows, uint64_t seed) {
  constexpr size_t kF = kSyntheticRegressionFeatures;
  Rng model(mixSeeds(seed, 0x5E6));
  std::vector<double> w(kF), scale(kF), offset(kF);
  for (size_t j = 0; j < kF; ++j) {
    w[j] = model.normal();
    // Features of different scales and offsets, so that standardisation matters as on real data.
    scale[j] = 0.5 + 2.5 * model.uniform();
    offset[j] = 4.0 * model.normal();
  }
  const double bias = 3.0 + model.normal();
  Dataset d;
  d.name = "synthetic-regression";
  d.rows = rows;
  d.num_numeric = kF;
  d.numeric.resize(rows * kF);
  d.labels.resize(rows);
  Rng rng(mixSeeds(seed, 0xDA7A));
  DatasetProgress progress("generating synthetic-regression", rows, "rows");
  for (size_t r = 0; r < rows; ++r) {
    progress.advance();
    double y = bias;
    for (size_t j = 0; j < kF; ++j) {
      const double z = rng.normal();
      d.numeric[r * kF + j] = static_cast<float>(offset[j] + scale[j] * z);
      y += w[j] * z;
    }
    d.labels[r] = static_cast<float>(y + 0.5 * rng.normal());
  }
  progress.finish();
  return d;
}

Dataset makeSyntheticCtr(size_t rows, uint64_t seed) {
  constexpr size_t kN = kCtrNumericFields;
  constexpr size_t kC = kCtrCategoricalFields;
  // The true model: logit = bias + sum_j w_j * (log1p(count_j) - mu_j) + sum_f effect_f(value_f),
  // with count_j = floor(exp(mu_j + sigma_j * N(0, 1))).
  Rng model(mixSeeds(seed, 0xC7A));
  double mu[kN], sigma[kN], w[kN];
  for (size_t j = 0; j < kN; ++j) {
    mu[j] = 0.5 + 2.5 * model.uniform();
    sigma[j] = 0.5 + model.uniform();
    w[j] = 0.3 * model.normal();
  }
  // Vocabularies of 3 to 100 values whose frequencies fall off steeply, as in click logs, plus a
  // long tail of values seen about once (5% of the first field's values, 15% of the last's), which
  // carry no signal but make the table grow with the data as Criteo's does: a batch touches a few
  // thousand rows of a table of hundreds of thousands. The vocabularies stay small because a model
  // needs about (parameters / rows) more log loss than the Bayes model; with these sizes the
  // default 200000 rows get within about 0.01 of the Bayes AUC.
  size_t vocab[kC];
  double effect_scale[kC], tail_share[kC];
  for (size_t f = 0; f < kC; ++f) {
    const double t = f / static_cast<double>(kC - 1);
    vocab[f] = static_cast<size_t>(std::lround(3.0 * std::pow(100.0 / 3.0, t)));
    // Fields with more values carry a little less signal each, as hashed ids of rare things do.
    effect_scale[f] = 0.4 / (1.0 + 0.5 * std::log10(static_cast<double>(vocab[f])));
    tail_share[f] = 0.05 + 0.1 * t;
  }
  constexpr double kSkew = 2.5;   // value = vocab * u^kSkew: small values are common
  constexpr double kBias = -1.3;  // about a fifth of rows are clicks (Criteo: a quarter)
  const uint64_t effect_seed = mixSeeds(seed, 0xEFF);

  Dataset d;
  d.name = "synthetic-ctr";
  d.rows = rows;
  d.num_numeric = kN;
  d.num_categorical = kC;
  d.num_classes = 2;
  d.numeric.resize(rows * kN);
  d.categorical.resize(rows * kC);
  d.labels.resize(rows);
  d.true_probability.resize(rows);
  Rng rng(mixSeeds(seed, 0xDA7A));
  DatasetProgress progress("generating synthetic-ctr", rows, "rows");
  for (size_t r = 0; r < rows; ++r) {
    progress.advance();
    double logit = kBias;
    for (size_t j = 0; j < kN; ++j) {
      const double count = std::floor(std::exp(mu[j] + sigma[j] * rng.normal()));
      const double x = std::log1p(count);
      d.numeric[r * kN + j] = static_cast<float>(x);
      logit += w[j] * (x - mu[j]);
    }
    for (size_t f = 0; f < kC; ++f) {
      uint64_t v;
      if (rng.uniform() < tail_share[f]) {
        v = vocab[f] + rng.below(uint64_t{1} << 40);
      } else {
        v = std::min<uint64_t>(vocab[f] - 1, static_cast<uint64_t>(std::pow(rng.uniform(), kSkew) * vocab[f]));
        // Each value's effect is a pure function of (seed, field, value): no table to keep.
        Rng effect(mixSeeds(effect_seed, (uint64_t{f} << 48) | v));
        logit += effect_scale[f] * effect.normal();
      }
      d.categorical[r * kC + f] = categoricalId(f, splitMix64(v));
    }
    const double p = 1.0 / (1.0 + std::exp(-logit));
    d.true_probability[r] = static_cast<float>(p);
    d.labels[r] = rng.uniform() < p ? 1.0f : 0.0f;
  }
  progress.finish();
  return d;
}

}  // namespace zps::train
