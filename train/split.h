// How loadDataset (dataset.h) divides a dataset's rows into train and test, and standardises them.
// Pure functions of their inputs, safe from any thread; every worker computes the same split from
// the same seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "train/dataset.h"
#include "zps/status.h"

namespace zps::train {

// "auto", "stratified" or "random"; InvalidArgument naming the valid ones otherwise.
StatusOr<SplitKind> splitKindFromName(const std::string& name);

// The rows of `all` that form the test split, ascending. Rows are visited in a permutation seeded
// by `seed`; round(rows * fraction) of them go to test (at most rows - 1, so training keeps one).
//   random      the first ones in that order
//   stratified  (classification only) each class gives its share: floor or ceil of its rows x
//               fraction, the ceilings going to the classes with the largest remainders (lowest
//               class first on ties) until the total is reached; within a class, the first rows
//               in the seeded order
//   auto        stratified for classification, random for regression
// Errors: stratified on regression data.
StatusOr<std::vector<size_t>> chooseTestRows(const Dataset& all, double fraction, uint64_t seed, SplitKind kind);

// Standardises the numeric features of both splits with the train split's mean and standard
// deviation (a constant column becomes 0). NaN marks a missing value: it counts in neither
// statistic and becomes the train mean, 0 once standardised.
void standardise(Dataset* train, Dataset* test);

}  // namespace zps::train
