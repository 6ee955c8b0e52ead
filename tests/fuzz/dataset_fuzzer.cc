// Fuzz target: the data readers behind loadDataset (train/dataset.h): csv:PATH, libsvm:PATH
// and criteo:PATH. Training files come from outside (a download, a user's export), so a bad line
// must give "PATH:LINE: what is wrong", never a crash or an inconsistent Dataset.
//
// Input layout:
//   byte 0   format: value % 3 (0 csv, 1 libsvm, 2 criteo)
//   byte 1   bits 0-1: task (value % 3: auto, regression, classification);
//            bits 2-3: test fraction (0.2, 0, 0.5, 0.9)
//   byte 2   csv label column, as a signed byte (-1 = last)
//   rest     the file, written to one scratch path per process
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_util.h"
#include "train/dataset.h"

namespace zps::fuzz {
namespace {

void checkDataset(const train::Dataset& d) {
  ZPS_FUZZ_CHECK(d.numeric.size() == d.rows * d.num_numeric);
  ZPS_FUZZ_CHECK(d.categorical.size() == d.rows * d.num_categorical);
  ZPS_FUZZ_CHECK(d.labels.size() == d.rows);
  ZPS_FUZZ_CHECK(d.num_classes == 0 || d.num_classes >= 2);
  if (d.num_classes >= 2) {
    for (float l : d.labels) {
      ZPS_FUZZ_CHECK(l >= 0 && l < d.num_classes && l == static_cast<int>(l));
    }
  }
}

}  // namespace
}  // namespace zps::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zps;
  fuzz::quietLogging();
  if (size < 3) return 0;
  static const char* const kFormats[] = {"csv:", "libsvm:", "criteo:"};
  static const train::Task kTasks[] = {train::Task::kAuto, train::Task::kRegression, train::Task::kClassification};
  static const double kFractions[] = {0.2, 0, 0.5, 0.9};

  static const std::string path = fuzz::ScratchDir::path() + "/data.txt";
  fuzz::writeFile(path, data + 3, size - 3);

  train::LoadOptions options;
  options.data_dir = fuzz::ScratchDir::path();  // never the real data folder
  options.task = kTasks[(data[1] & 3) % 3];
  options.test_fraction = kFractions[(data[1] >> 2) & 3];
  options.label_column = static_cast<int8_t>(data[2]);
  const std::string spec = kFormats[data[0] % 3] + path;

  auto split = train::loadDataset(spec, options);
  if (!split.ok()) {
    ZPS_FUZZ_CHECK(!split.status().message().empty());
    return 0;
  }
  const train::Dataset& tr = split->train;
  const train::Dataset& te = split->test;
  ZPS_FUZZ_CHECK(tr.rows >= 1);
  ZPS_FUZZ_CHECK(tr.num_numeric == te.num_numeric && tr.num_categorical == te.num_categorical);
  ZPS_FUZZ_CHECK(tr.num_classes == te.num_classes);
  if (data[0] % 3 == 2) {
    ZPS_FUZZ_CHECK(tr.num_classes == 2 && tr.num_categorical == 26);  // criteo ignores the task
  } else if (options.task == train::Task::kRegression) {
    ZPS_FUZZ_CHECK(tr.num_classes == 0);
  }
  fuzz::checkDataset(tr);
  fuzz::checkDataset(te);
  return 0;
}
