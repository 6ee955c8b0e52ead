#include "train/split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "train/random.h"

namespace zps::train {

StatusOr<SplitKind> splitKindFromName(const std::string& name) {
  if (name == "auto") return SplitKind::kAuto;
  if (name == "stratified") return SplitKind::kStratified;
  if (name == "random") return SplitKind::kRandom;
  return InvalidArgument("unknown split '" + name + "' (valid: auto, stratified, random)");
}

namespace {

// How many test rows each class gives: largest remainders, so the total is exactly `total` and
// every class is within one row of its exact share.
std::vector<size_t> classQuotas(const std::vector<size_t>& per_class, double fraction, size_t total) {
  const size_t classes = per_class.size();
  std::vector<size_t> quota(classes);
  std::vector<double> remainder(classes);
  size_t given = 0;
  for (size_t c = 0; c < classes; ++c) {
    const double exact = static_cast<double>(per_class[c]) * fraction;
    quota[c] = static_cast<size_t>(std::floor(exact));
    remainder[c] = exact - static_cast<double>(quota[c]);
    given += quota[c];
  }
  std::vector<size_t> by_remainder(classes);
  std::iota(by_remainder.begin(), by_remainder.end(), size_t{0});
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t i = 0; given < total && i < classes; ++i) {
    const size_t c = by_remainder[i];
    if (quota[c] < per_class[c]) {
      ++quota[c];
      ++given;
    }
  }
  return quota;
}

}  // namespace

StatusOr<std::vector<size_t>> chooseTestRows(const Dataset& all, double fraction, uint64_t seed, SplitKind kind) {
  if (kind == SplitKind::kAuto) kind = all.isRegression() ? SplitKind::kRandom : SplitKind::kStratified;
  if (kind == SplitKind::kStratified && all.isRegression())
    return InvalidArgument("dataset '" + all.name +
                           "' has regression targets: a stratified split needs classes (use --split random)");
  const std::vector<size_t> perm = seededPermutation(all.rows, mixSeeds(seed, 0x5917));
  size_t total = static_cast<size_t>(std::llround(static_cast<double>(all.rows) * fraction));
  total = std::min(total, all.rows - 1);  // keep at least one training row
  std::vector<size_t> test;
  if (kind == SplitKind::kRandom) {
    test.assign(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(total));
  } else {
    std::vector<size_t> per_class(static_cast<size_t>(all.num_classes), 0);
    for (float l : all.labels) ++per_class[static_cast<size_t>(l)];  // labels are checked class indices
    std::vector<size_t> quota = classQuotas(per_class, fraction, total);
    for (size_t row : perm) {
      size_t& q = quota[static_cast<size_t>(all.labels[row])];
      if (q == 0) continue;
      --q;
      test.push_back(row);
    }
  }
  std::sort(test.begin(), test.end());
  return test;
}

// A value that is really 0 becomes (0 - mean) / sd; a missing one (NaN: Criteo's empty numeric
// fields) the mean's 0.
void standardise(Dataset* train, Dataset* test) {
  const size_t f = train->num_numeric;
  if (f == 0 || train->rows == 0) return;
  std::vector<double> mean(f, 0.0), var(f, 0.0);
  std::vector<size_t> present(f, 0);
  for (size_t r = 0; r < train->rows; ++r) {
    for (size_t j = 0; j < f; ++j) {
      const float v = train->numeric[r * f + j];
      if (std::isnan(v)) continue;
      mean[j] += v;
      ++present[j];
    }
  }
  for (size_t j = 0; j < f; ++j) mean[j] = present[j] ? mean[j] / static_cast<double>(present[j]) : 0.0;
  for (size_t r = 0; r < train->rows; ++r) {
    for (size_t j = 0; j < f; ++j) {
      const float v = train->numeric[r * f + j];
      if (std::isnan(v)) continue;
      const double dv = v - mean[j];
      var[j] += dv * dv;
    }
  }
  std::vector<double> inv_std(f);
  for (size_t j = 0; j < f; ++j) {
    const double sd = present[j] ? std::sqrt(var[j] / static_cast<double>(present[j])) : 0.0;
    // A constant column (digits' border pixels) carries nothing; centring alone makes it 0.
    inv_std[j] = sd > 1e-12 ? 1.0 / sd : 1.0;
  }
  for (Dataset* d : {train, test}) {
    for (size_t r = 0; r < d->rows; ++r) {
      for (size_t j = 0; j < f; ++j) {
        float& v = d->numeric[r * f + j];
        v = std::isnan(v) ? 0.0f : static_cast<float>((v - mean[j]) * inv_std[j]);
      }
    }
  }
}

}  // namespace zps::train
