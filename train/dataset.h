// Datasets for the built-in training programs: readers for CSV, LibSVM and Criteo text files, the
// small real datasets that tools/fetch-datasets.sh puts in the data folder, and deterministic
// generators for synthetic regression and synthetic Criteo-like CTR data. Pure compute, no
// networking.
//
// A Dataset is a plain value: whoever loads it owns it, and it is read-only afterwards, so any
// number of threads may read one at once. Loading is deterministic: the same spec, files and
// options give the same rows, in the same order, on every worker.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zps/status.h"

namespace zps::train {

struct Dataset {
  std::string name;  // the spec it came from, for log lines and errors
  size_t rows = 0;
  size_t num_numeric = 0;      // dense features per row
  std::vector<float> numeric;  // rows x num_numeric, row-major; standardised (see loadDataset)
  size_t num_categorical = 0;  // categorical fields per row (CTR data); 0 otherwise
  // rows x num_categorical hashed ids; the hash mixes in the field index (categoricalId).
  std::vector<uint64_t> categorical;
  std::vector<float> labels;            // regression target, class index (as float), or 0/1 click
  int num_classes = 0;                  // 0 = regression, >= 2 = classification (2 with CTR = binary)
  std::vector<float> true_probability;  // synthetic CTR only: the generator's P(click) per row

  bool isRegression() const { return num_classes == 0; }
  const float* numericRow(size_t row) const { return numeric.data() + row * num_numeric; }
  const uint64_t* categoricalRow(size_t row) const { return categorical.data() + row * num_categorical; }
};

struct Split {
  Dataset train;
  Dataset test;
};

// How to read labels when a file does not say: kAuto calls a label column classification when every
// label is an integer in [0, 100) (num_classes = largest label + 1, at least 2) and regression
// otherwise. LibSVM labels -1/+1 always mean binary classification (-1 becomes class 0).
enum class Task { kAuto, kRegression, kClassification };

// How the rows are divided into train and test (train/split.h): kAuto is stratified by class
// for classification and random for regression.
enum class SplitKind { kAuto, kStratified, kRandom };

struct LoadOptions {
  std::string data_dir = "data";  // where the named real datasets live (tools/fetch-datasets.sh)
  int label_column = -1;          // csv: the label's column; negative counts from the end (-1 = last)
  Task task = Task::kAuto;        // csv and libsvm files
  double test_fraction = 0.2;     // in [0, 1): the share of rows held out for the test split
  SplitKind split = SplitKind::kAuto;
  // libsvm: the first feature's index, 0 or 1; -1 detects it: 0-based when an index 0 appears,
  // else 1-based, which it then says on stderr (a 0-based file that never sets feature 0 looks
  // 1-based). Base 1 refuses an index 0.
  int libsvm_base = -1;
  uint64_t seed = 1;          // the split, and the synthetic generators
  size_t synthetic_rows = 0;  // synthetic datasets: rows before the split (0 = the default below)
};

// Default sizes of the synthetic datasets.
inline constexpr size_t kSyntheticRegressionRows = 4096;
inline constexpr size_t kSyntheticRegressionFeatures = 16;
inline constexpr size_t kSyntheticCtrRows = 200000;
inline constexpr size_t kCtrNumericFields = 13;      // like Criteo's I1..I13
inline constexpr size_t kCtrCategoricalFields = 26;  // like Criteo's C1..C26

// Loads a dataset and splits it into train and test.
//
// Specs:
//   digits                data_dir/digits.csv: 8x8 images, 64 features, 10 classes (1797 rows)
//   breast_cancer         data_dir/breast_cancer.csv: 30 features, 2 classes (569 rows)
//   diabetes              data_dir/diabetes_data_raw.csv and diabetes_target.csv: 10 features,
//                         regression (442 rows)
//   synthetic-regression  y = w.x + b + N(0, 0.5^2) noise, 16 features; w, b drawn from the seed
//   synthetic-ctr         13 numeric fields (log1p of log-normal counts) and 26 hashed categorical
//                         fields with skewed value frequencies and a long tail of rare values;
//                         P(click) is a known logistic function of them (about 20% clicks), kept
//                         in true_probability, so rocAuc(true_probability) on the test split is
//                         the Bayes-optimal AUC
//   csv:PATH              numbers separated by commas or whitespace; a first line that is not all
//                         numbers is a header and skipped; the label is options.label_column
//   libsvm:PATH           "label idx:val idx:val ..." (indices as options.libsvm_base says);
//                         features not listed are 0. Stored dense: for narrow data.
//   criteo:PATH           Criteo's TSV "label<TAB>I1..I13<TAB>C1..C26"; numeric values become
//                         sign(x) * log1p(|x|), categorical strings are hashed with their field
//                         index; an empty categorical field is a value of its own (the hash of ""),
//                         an empty numeric field is missing: it becomes the train split's mean (0
//                         once standardised), not the value 0 (which standardises to -mean / sd)
// Blank lines and lines starting with '#' are skipped in every file format.
//
// Generating synthetic rows and reading a file show their progress on stderr when they take more
// than 2 s (train/dataset_progress.h).
//
// Errors: an unknown spec or a bad option gives InvalidArgument; a missing file NotFound (naming
// the path, and tools/fetch-datasets.sh for the named datasets); a malformed line InvalidArgument
// reading "PATH:LINE: what is wrong"; a dataset with no rows InvalidArgument.
//
// The split (split.h's chooseTestRows): round(rows * test_fraction) rows go to test, stratified by
// class or at random as options.split says, the rest to train (each keeps file order). Numeric
// features are then standardised with the train split's mean and standard deviation (a constant
// column becomes 0); labels, including regression targets, are left as they are.
StatusOr<Split> loadDataset(const std::string& spec, const LoadOptions& options);

// The order in which an epoch visits the rows of a split: a permutation of [0, rows) seeded by
// (seed, epoch), epochs counted from 0. Every worker computes the same order, then takes its own
// slice of each global batch (batchSlice).
std::vector<size_t> epochOrder(size_t rows, uint64_t seed, uint64_t epoch);

// The slice [first, second) of a global batch of n rows that worker `rank` of `workers` computes:
// contiguous slices, the first n % workers ranks one row longer. Concatenated in rank order they
// are the whole batch, so W workers on slices sum to one worker on the whole batch.
std::pair<size_t, size_t> batchSlice(size_t n, int rank, int workers);

// The given rows of `data`, in the given order (e.g. one worker's shard).
Dataset selectRows(const Dataset& data, const std::vector<size_t>& rows);

// The generators on their own, before any split or standardisation (tests and tools use them).
Dataset makeSyntheticRegression(size_t rows, uint64_t seed);
Dataset makeSyntheticCtr(size_t rows, uint64_t seed);

// Hashes one categorical value of one field into an id (what the Criteo reader and the CTR
// generator use): ids of different fields never collide by construction of the mix, only by 64-bit
// chance.
uint64_t categoricalId(size_t field, uint64_t value_hash);

}  // namespace zps::train
