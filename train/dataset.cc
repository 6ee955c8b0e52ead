#include "train/dataset.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "train/data_files.h"
#include "train/random.h"
#include "train/split.h"

namespace zps::train {
namespace {

std::string fetchHint(const std::string& dir) {
  return "; run tools/fetch-datasets.sh " + dir + " to fetch the named datasets";
}

Status checkShape(const Dataset& d, const std::string& path, size_t features, int classes) {
  if (d.num_numeric != features || d.num_classes != classes) {
    return InvalidArgument(path + ": expected " + std::to_string(features) + " features and " +
                           std::to_string(classes) + " classes, found " + std::to_string(d.num_numeric) + " and " +
                           std::to_string(d.num_classes) + "; is it the file tools/fetch-datasets.sh fetches?");
  }
  return Status::OK();
}

StatusOr<Dataset> loadNamedFile(const std::string& name, const LoadOptions& o) {
  const std::string dir = o.data_dir.empty() ? "." : o.data_dir;
  auto withHint = [&](const Status& s) {
    return s.code() == StatusCode::kNotFound ? Status(s.code(), s.message() + fetchHint(dir)) : s;
  };
  if (name == "digits" || name == "breast_cancer") {
    const std::string path = dir + "/" + name + ".csv";
    auto d = readCsv(path, -1, Task::kClassification);
    if (!d.ok()) return withHint(d.status());
    const bool digits = name == "digits";
    ZPS_RETURN_IF_ERROR(checkShape(*d, path, digits ? 64 : 30, digits ? 10 : 2));
    return std::move(d).value();
  }
  // diabetes: features and targets live in two whitespace-separated files of equal length.
  const std::string xpath = dir + "/diabetes_data_raw.csv";
  const std::string ypath = dir + "/diabetes_target.csv";
  auto x = readNumericTable(xpath);
  if (!x.ok()) return withHint(x.status());
  auto y = readNumericTable(ypath);
  if (!y.ok()) return withHint(y.status());
  if (x->rows() == 0) return InvalidArgument(xpath + ": no data rows");
  if (x->cols != 10 || y->cols != 1 || x->rows() != y->rows()) {
    return InvalidArgument("diabetes: expected 10 features per row in " + xpath + " and one target per row in " +
                           ypath + ", found " + std::to_string(x->rows()) + " rows of " + std::to_string(x->cols) +
                           " and " + std::to_string(y->rows()) + " rows of " + std::to_string(y->cols));
  }
  Dataset d;
  d.rows = x->rows();
  d.num_numeric = x->cols;
  d.numeric.assign(x->values.begin(), x->values.end());
  d.labels.assign(y->values.begin(), y->values.end());
  return d;
}

}  // namespace

uint64_t categoricalId(size_t field, uint64_t value_hash) {
  return splitMix64(value_hash ^ splitMix64(0xC47E6000ull + field));
}

Dataset selectRows(const Dataset& data, const std::vector<size_t>& rows) {
  Dataset d;
  d.name = data.name;
  d.rows = rows.size();
  d.num_numeric = data.num_numeric;
  d.num_categorical = data.num_categorical;
  d.num_classes = data.num_classes;
  d.numeric.reserve(rows.size() * d.num_numeric);
  d.categorical.reserve(rows.size() * d.num_categorical);
  d.labels.reserve(rows.size());
  for (size_t r : rows) {
    d.numeric.insert(d.numeric.end(), data.numericRow(r), data.numericRow(r) + d.num_numeric);
    d.categorical.insert(d.categorical.end(), data.categoricalRow(r), data.categoricalRow(r) + d.num_categorical);
    d.labels.push_back(data.labels[r]);
    if (!data.true_probability.empty()) d.true_probability.push_back(data.true_probability[r]);
  }
  return d;
}

std::vector<size_t> epochOrder(size_t rows, uint64_t seed, uint64_t epoch) {
  return seededPermutation(rows, mixSeeds(seed, 0xE90C0000ull + epoch));
}

std::pair<size_t, size_t> batchSlice(size_t n, int rank, int workers) {
  const size_t w = static_cast<size_t>(workers > 0 ? workers : 1);
  const size_t r = static_cast<size_t>(rank > 0 ? rank : 0);
  const size_t base = n / w, extra = n % w;
  const size_t first = r * base + std::min(r, extra);
  const size_t len = r < w ? base + (r < extra ? 1 : 0) : 0;
  return {std::min(first, n), std::min(first + len, n)};
}

namespace {

// The whole dataset a spec names, before the split.
StatusOr<Dataset> loadUnsplit(const std::string& spec, const LoadOptions& options) {
  auto prefixed = [&](std::string_view prefix) {
    return spec.size() > prefix.size() && spec.compare(0, prefix.size(), prefix) == 0;
  };
  if (spec == "digits" || spec == "breast_cancer" || spec == "diabetes") {
    return loadNamedFile(spec, options);
  }
  if (spec == "synthetic-regression") {
    return makeSyntheticRegression(options.synthetic_rows ? options.synthetic_rows : kSyntheticRegressionRows,
                                   options.seed);
  }
  if (spec == "synthetic-ctr") {
    return makeSyntheticCtr(options.synthetic_rows ? options.synthetic_rows : kSyntheticCtrRows, options.seed);
  }
  if (prefixed("csv:")) return readCsv(spec.substr(4), options.label_column, options.task);
  if (prefixed("libsvm:")) return readLibsvm(spec.substr(7), options.task, options.libsvm_base);
  if (prefixed("criteo:")) return readCriteo(spec.substr(7));
  return InvalidArgument("unknown dataset '" + spec +
                         "' (valid: digits, breast_cancer, diabetes, synthetic-regression, "
                         "synthetic-ctr, csv:PATH, libsvm:PATH, criteo:PATH)");
}

}  // namespace

StatusOr<Split> loadDataset(const std::string& spec, const LoadOptions& options) {
  if (!(options.test_fraction >= 0 && options.test_fraction < 1)) {
    return InvalidArgument("test fraction must be in [0, 1), got " + std::to_string(options.test_fraction));
  }
  ZPS_ASSIGN_OR_RETURN(Dataset all, loadUnsplit(spec, options));
  all.name = spec;
  if (all.rows == 0) return InvalidArgument("dataset '" + spec + "' has no rows");

  ZPS_ASSIGN_OR_RETURN(std::vector<size_t> test_idx,
                       chooseTestRows(all, options.test_fraction, options.seed, options.split));
  std::vector<size_t> train_idx;
  train_idx.reserve(all.rows - test_idx.size());
  for (size_t r = 0, t = 0; r < all.rows; ++r) {
    if (t < test_idx.size() && test_idx[t] == r)
      ++t;
    else
      train_idx.push_back(r);
  }
  Split split{selectRows(all, train_idx), selectRows(all, test_idx)};
  standardise(&split.train, &split.test);
  return split;
}

}  // namespace zps::train
