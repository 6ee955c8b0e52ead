#include "train/data_files.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <utility>

#include "ps/common/regular_file.h"
#include "train/dataset_progress.h"
#include "train/random.h"

namespace zps::train {
namespace {

constexpr int kMaxAutoClasses = 100;
// LibSVM rows are stored dense; beyond this many floats a file needs a sparse format instead.
constexpr size_t kMaxDenseFloats = size_t{1} << 28;
constexpr size_t kMaxLibsvmIndex = size_t{1} << 20;
// The longest line a data file may have: a LibSVM row with every one of kMaxLibsvmIndex features fits.
constexpr size_t kMaxLineBytes = size_t{32} << 20;
constexpr size_t kCriteoColumns = 1 + kCtrNumericFields + kCtrCategoricalFields;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool parseDouble(std::string_view s, double* out) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

void splitWhitespace(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) fields->push_back(line.substr(start, i - start));
  }
}

// Splits on commas when the line has one, else on runs of whitespace.
void splitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  if (line.find(',') != std::string_view::npos) {
    size_t start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      fields->push_back(trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return;
  }
  splitWhitespace(line, fields);
}

std::string quoted(std::string_view s) {
  constexpr size_t kMax = 40;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "...'";
  return "'" + std::string(s) + "'";
}

std::string where(const std::string& path, size_t line) { return path + ":" + std::to_string(line) + ": "; }

// zps trains in float32: a value that is finite as a double but not as a float (|x| > 3.4e38) would
// enter training as an infinity. Empty when `v` fits, else what is wrong with it.
std::string floatRangeError(std::string_view text, double v) {
  if (std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max())) return "";
  return quoted(trim(text)) + " is outside float32's range (|x| <= 3.4e38), in which zps trains";
}

// Like std::getline, but stops storing after kMaxLineBytes + 1 bytes, so that a file without line breaks
// (or /dev/zero) costs a bounded buffer; the caller refuses a line that long.
bool boundedGetline(std::istream& in, std::string* line) {
  line->clear();
  std::streambuf* buf = in.rdbuf();
  for (;;) {
    int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return !line->empty();
    }
    if (c == '\n') return true;
    line->push_back(static_cast<char>(c));
    if (line->size() > kMaxLineBytes) return true;
  }
}

// Reads a text file line by line, skipping blank lines and '#' comments. The callback gets the line
// number (1-based) and the line without its end-of-line characters, and returns a Status to stop.
// A big file shows its progress (DatasetProgress) while it is read.
template <typename F>
Status forEachLine(const std::string& path, F&& callback) {
  // A folder, FIFO or device is refused before the stream opens it (ps/common/regular_file.h).
  ZPS_RETURN_IF_ERROR(checkRegularFile("data file ", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("data file " + path + " cannot be read: " + std::strerror(errno));
  std::error_code size_error;
  const uintmax_t size = std::filesystem::file_size(path, size_error);
  DatasetProgress progress("reading " + path, size_error ? 0 : size, "bytes");
  std::string line;
  size_t number = 0;
  while (boundedGetline(in, &line)) {
    ++number;
    if (line.size() > kMaxLineBytes)
      return InvalidArgument(where(path, number) + "line longer than " + std::to_string(kMaxLineBytes >> 20) +
                             " MiB (a file without line breaks, or not a text file?)");
    progress.advance(line.size() + 1);
    std::string_view view(line);
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    const std::string_view t = trim(view);
    if (t.empty() || t.front() == '#') continue;
    ZPS_RETURN_IF_ERROR(callback(number, view));
  }
  if (in.bad()) return InternalError("error reading " + path + ": " + std::strerror(errno));
  progress.finish();
  return Status::OK();
}

}  // namespace

StatusOr<NumericTable> readNumericTable(const std::string& path) {
  NumericTable table;
  std::vector<std::string_view> fields;
  bool first = true;
  size_t cols_line = 0;
  Status s = forEachLine(path, [&](size_t number, std::string_view line) -> Status {
    splitFields(line, &fields);
    // A line of only separators has no values; counting it as a row would misalign every row after it.
    if (fields.empty()) return InvalidArgument(where(path, number) + "no values on this line");
    const bool header_allowed = first;
    first = false;
    const size_t start = table.values.size();
    std::string overflow;  // the first value outside float32's range (reported once the line is a row)
    for (size_t c = 0; c < fields.size(); ++c) {
      double v;
      if (!parseDouble(fields[c], &v)) {
        table.values.resize(start);
        // Only the first line may be a header: a bad value further down is an error, never skipped.
        if (header_allowed) return Status::OK();
        if (fields[c].empty()) {
          return InvalidArgument(where(path, number) + "column " + std::to_string(c + 1) + " is empty");
        }
        return InvalidArgument(where(path, number) + "column " + std::to_string(c + 1) + ": " + quoted(fields[c]) +
                               " is not a finite number");
      }
      if (std::string e = floatRangeError(fields[c], v); !e.empty() && overflow.empty())
        overflow = where(path, number) + "column " + std::to_string(c + 1) + ": " + e;
      table.values.push_back(v);
    }
    if (!overflow.empty()) return InvalidArgument(overflow);
    if (table.cols == 0) {
      table.cols = fields.size();
      cols_line = number;
    } else if (fields.size() != table.cols) {
      return InvalidArgument(where(path, number) + "expected " + std::to_string(table.cols) + " columns (as on line " +
                             std::to_string(cols_line) + "), got " + std::to_string(fields.size()));
    }
    table.lines.push_back(number);
    return Status::OK();
  });
  if (!s.ok()) return s;
  return table;
}

namespace {

bool isClassIndex(double v, int limit) { return v >= 0 && v < limit && v == std::floor(v); }

// Resolves the task for a label column and fills num_classes; labels are checked when
// classification.
Status resolveLabels(const std::string& path, const std::vector<size_t>& lines, Task task, Dataset* d) {
  if (task == Task::kAuto) {
    task = Task::kClassification;
    for (float l : d->labels) {
      if (!isClassIndex(l, kMaxAutoClasses)) {
        task = Task::kRegression;
        break;
      }
    }
  }
  if (task == Task::kRegression) {
    d->num_classes = 0;
    return Status::OK();
  }
  float max_label = 0;
  for (size_t i = 0; i < d->labels.size(); ++i) {
    const float l = d->labels[i];
    if (!isClassIndex(l, 1 << 24)) {
      return InvalidArgument(where(path, lines[i]) + "label " + std::to_string(l) +
                             " is not a class index (a non-negative integer)");
    }
    max_label = std::max(max_label, l);
  }
  d->num_classes = std::max(2, static_cast<int>(max_label) + 1);
  return Status::OK();
}

}  // namespace

StatusOr<Dataset> readCsv(const std::string& path, int label_column, Task task) {
  ZPS_ASSIGN_OR_RETURN(NumericTable t, readNumericTable(path));
  if (t.rows() == 0) return InvalidArgument(path + ": no data rows");
  if (t.cols < 2) {
    return InvalidArgument(path + ": needs at least 2 columns (features and a label), has " + std::to_string(t.cols));
  }
  const long long cols = static_cast<long long>(t.cols);
  const long long lc = label_column >= 0 ? label_column : cols + label_column;
  if (lc < 0 || lc >= cols) {
    return InvalidArgument(path + ": label column " + std::to_string(label_column) + " is out of range for " +
                           std::to_string(cols) + " columns (0.." + std::to_string(cols - 1) + ", or -1..-" +
                           std::to_string(cols) + " from the end)");
  }
  Dataset d;
  d.rows = t.rows();
  d.num_numeric = t.cols - 1;
  d.numeric.reserve(d.rows * d.num_numeric);
  d.labels.reserve(d.rows);
  for (size_t r = 0; r < d.rows; ++r) {
    const double* row = t.values.data() + r * t.cols;
    for (size_t c = 0; c < t.cols; ++c) {
      if (static_cast<long long>(c) == lc) {
        d.labels.push_back(static_cast<float>(row[c]));
      } else {
        d.numeric.push_back(static_cast<float>(row[c]));
      }
    }
  }
  ZPS_RETURN_IF_ERROR(resolveLabels(path, t.lines, task, &d));
  return d;
}

StatusOr<Dataset> readLibsvm(const std::string& path, Task task, int base) {
  Dataset d;
  std::vector<std::pair<size_t, size_t>> row_ranges;  // [begin, end) into entries
  std::vector<std::pair<uint32_t, float>> entries;
  std::vector<size_t> lines;
  std::vector<std::string_view> tokens;
  bool zero_based = false;
  size_t max_index = 0;
  Status s = forEachLine(path, [&](size_t number, std::string_view line) -> Status {
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    splitWhitespace(line, &tokens);
    double label;
    if (tokens.empty() || !parseDouble(tokens[0], &label)) {
      return InvalidArgument(where(path, number) + "expected a numeric label first, got " +
                             quoted(tokens.empty() ? line : tokens[0]));
    }
    if (std::string e = floatRangeError(tokens[0], label); !e.empty())
      return InvalidArgument(where(path, number) + "label " + e);
    const size_t begin = entries.size();
    for (size_t i = 1; i < tokens.size(); ++i) {
      const std::string_view tok = tokens[i];
      const size_t colon = tok.find(':');
      if (colon == std::string_view::npos) {
        return InvalidArgument(where(path, number) + "feature " + quoted(tok) + " is not of the form index:value");
      }
      if (tok.substr(0, colon) == "qid") continue;
      size_t index = 0;
      const std::string_view idx = tok.substr(0, colon);
      auto [ptr, ec] = std::from_chars(idx.data(), idx.data() + idx.size(), index);
      if (ec != std::errc() || ptr != idx.data() + idx.size() || index > kMaxLibsvmIndex) {
        return InvalidArgument(where(path, number) + "feature index " + quoted(idx) + " is not an integer in [0, " +
                               std::to_string(kMaxLibsvmIndex) + "]");
      }
      double value;
      if (!parseDouble(tok.substr(colon + 1), &value)) {
        return InvalidArgument(where(path, number) + "feature " + quoted(tok) + " has no finite numeric value");
      }
      if (std::string e = floatRangeError(tok.substr(colon + 1), value); !e.empty())
        return InvalidArgument(where(path, number) + "feature " + std::to_string(index) + ": " + e);
      for (size_t e = begin; e < entries.size(); ++e) {
        if (entries[e].first == index) {
          return InvalidArgument(where(path, number) + "feature index " + std::to_string(index) + " appears twice");
        }
      }
      if (index == 0 && base == 1) {
        return InvalidArgument(where(path, number) +
                               "feature index 0 in a file read as 1-based (--libsvm_base 1); "
                               "use --libsvm_base 0 or auto if the file counts from 0");
      }
      zero_based |= index == 0;
      max_index = std::max(max_index, index);
      entries.emplace_back(static_cast<uint32_t>(index), static_cast<float>(value));
    }
    row_ranges.emplace_back(begin, entries.size());
    lines.push_back(number);
    d.labels.push_back(static_cast<float>(label));
    return Status::OK();
  });
  if (!s.ok()) return s;
  if (lines.empty()) return InvalidArgument(path + ": no data rows");
  if (base == 0) {
    zero_based = true;
  } else if (base < 0 && !zero_based) {
    // A 0-based file whose feature 0 is never set looks 1-based: say which reading was taken.
    std::fprintf(stderr,
                 "zps: %s: no feature index 0, so indices are read as 1-based (feature k is column k-1); "
                 "pass --libsvm_base 0 if the file counts from 0\n",
                 path.c_str());
  }
  d.rows = lines.size();
  d.num_numeric = zero_based ? max_index + 1 : max_index;
  if (d.num_numeric == 0) return InvalidArgument(path + ": no features on any line");
  // Stored dense, so a few lines naming a huge feature index must not cost gigabytes: beyond 16M floats
  // the file must fill at least 1/64 of the dense table.
  const size_t dense_budget = std::min(kMaxDenseFloats, std::max<size_t>(size_t{1} << 24, entries.size() * 64));
  if (d.rows > dense_budget / d.num_numeric) {
    return InvalidArgument(path + ": " + std::to_string(d.rows) + " rows x " + std::to_string(d.num_numeric) +
                           " features is too large to store dense; use criteo:PATH for hashed features");
  }
  d.numeric.assign(d.rows * d.num_numeric, 0.0f);
  for (size_t r = 0; r < d.rows; ++r) {
    for (size_t e = row_ranges[r].first; e < row_ranges[r].second; ++e) {
      const size_t col = zero_based ? entries[e].first : entries[e].first - 1;
      d.numeric[r * d.num_numeric + col] = entries[e].second;
    }
  }
  if (task != Task::kRegression) {
    const bool plus_minus =
        std::all_of(d.labels.begin(), d.labels.end(), [](float l) { return l == 1.0f || l == -1.0f; });
    if (plus_minus) {
      for (float& l : d.labels) l = l > 0 ? 1.0f : 0.0f;
    }
  }
  ZPS_RETURN_IF_ERROR(resolveLabels(path, lines, task, &d));
  return d;
}

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace

StatusOr<Dataset> readCriteo(const std::string& path) {
  Dataset d;
  d.num_numeric = kCtrNumericFields;
  d.num_categorical = kCtrCategoricalFields;
  d.num_classes = 2;
  std::vector<std::string_view> fields;
  Status s = forEachLine(path, [&](size_t number, std::string_view line) -> Status {
    fields.clear();
    size_t start = 0;
    while (true) {
      const size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab == std::string_view::npos ? line.npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != kCriteoColumns) {
      return InvalidArgument(where(path, number) + "expected " + std::to_string(kCriteoColumns) +
                             " tab-separated fields (label, " + std::to_string(kCtrNumericFields) + " numeric, " +
                             std::to_string(kCtrCategoricalFields) + " categorical), got " +
                             std::to_string(fields.size()));
    }
    const std::string_view label = trim(fields[0]);
    if (label != "0" && label != "1") {
      return InvalidArgument(where(path, number) + "label " + quoted(label) + " is not 0 or 1");
    }
    d.labels.push_back(label == "1" ? 1.0f : 0.0f);
    for (size_t j = 0; j < kCtrNumericFields; ++j) {
      const std::string_view f = trim(fields[1 + j]);
      if (f.empty()) {
        d.numeric.push_back(std::numeric_limits<float>::quiet_NaN());  // missing: see standardise
        continue;
      }
      double v = 0;
      if (!parseDouble(f, &v)) {
        return InvalidArgument(where(path, number) + "numeric field I" + std::to_string(j + 1) + ": " + quoted(f) +
                               " is not a number");
      }
      // Counts span orders of magnitude; the log keeps a few huge ones from dominating the
      // standardised feature.
      d.numeric.push_back(static_cast<float>(std::copysign(std::log1p(std::fabs(v)), v)));
    }
    for (size_t f = 0; f < kCtrCategoricalFields; ++f) {
      d.categorical.push_back(categoricalId(f, fnv1a(trim(fields[1 + kCtrNumericFields + f]))));
    }
    ++d.rows;
    return Status::OK();
  });
  if (!s.ok()) return s;
  if (d.rows == 0) return InvalidArgument(path + ": no data rows");
  return d;
}

}  // namespace zps::train
