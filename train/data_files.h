// Reading dataset files: CSV, LibSVM and Criteo's TSV into a Dataset, and whitespace-separated tables
// of numbers. Every line is bounded (a file without line breaks, or /dev/zero, costs a bounded buffer),
// a folder, FIFO or device is refused by path before it is opened, and every error names the file and
// line. Pure functions of the file; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "train/dataset.h"
#include "zps/status.h"

namespace zps::train {

// A rectangular table of numbers, with the file line each row came from (for later error messages).
struct NumericTable {
  size_t cols = 0;
  std::vector<double> values;
  std::vector<size_t> lines;
  size_t rows() const { return lines.size(); }
};

// Whitespace-separated numbers, one row per line, every row as long as the first.
StatusOr<NumericTable> readNumericTable(const std::string& path);
// A CSV file of numbers; the label is column `label_column` (negative counts from the end).
StatusOr<Dataset> readCsv(const std::string& path, int label_column, Task task);
// LibSVM rows (`label index:value ...`), stored dense; `base` 0, 1, or -1 (auto: 0 when an index 0 appears).
StatusOr<Dataset> readLibsvm(const std::string& path, Task task, int base);
// Criteo's TSV: a 0/1 label, 13 integer features and 26 hashed categorical ones per line.
StatusOr<Dataset> readCriteo(const std::string& path);

}  // namespace zps::train
