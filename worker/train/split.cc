#include "worker/train/split.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "worker/train/random.h"

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

StatusOr<std::vector<size_t>> chooseTestRows(const Dataset& all, double fraction, uint64_t seed,
                                             SplitKind kind) {
  if (kind == SplitKind::kAuto) kind = all.isRegression() ? SplitKind::kRandom : SplitKind::kStratified;
  if (kind == SplitKind::kStratified && all.isRegression())
    return InvalidArgument("dataset '" + all.name + "' has regression targets: a stratified split needs classes (use --split random)");
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

}  // namespace zps::train
