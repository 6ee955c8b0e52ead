// What the dataset tests share: the real data folder, temporary files, and loading a spec whole.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "train/dataset.h"

namespace zps::train {

namespace fs = std::filesystem;

inline std::string dataDir() {
  if (const char* e = std::getenv("ZPS_DATA_DIR"); e != nullptr && *e != '\0') return e;
  return std::string(ZPS_SOURCE_DIR) + "/data";
}

inline void requireRealData() {
  const std::string dir = dataDir();
  for (const char* f : {"digits.csv", "breast_cancer.csv", "diabetes_data_raw.csv", "diabetes_target.csv"}) {
    if (!fs::exists(fs::path(dir) / f)) {
      FAIL(dir << "/" << f << " is missing: run tools/fetch-datasets.sh (or set ZPS_DATA_DIR)");
    }
  }
}

// A file in a fresh temporary folder, removed with the object.
class TempFile {
 public:
  explicit TempFile(const std::string& contents, const std::string& name = "data.txt") {
    static int counter = 0;
    dir_ =
        fs::temp_directory_path() / ("zps_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const std::string& path() const { return path_; }
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
  std::string path_;
};

inline LoadOptions noSplit() {
  LoadOptions o;
  o.test_fraction = 0;
  return o;
}

// Loads a file spec without a test split; the rows stay in file order, standardised over all rows.
inline Dataset loadAll(const std::string& spec, LoadOptions o = noSplit()) {
  o.test_fraction = 0;
  auto s = loadDataset(spec, o);
  REQUIRE(s.ok());
  return std::move(s).value().train;
}

inline std::string errorOf(const std::string& spec, LoadOptions o = noSplit()) {
  auto s = loadDataset(spec, o);
  REQUIRE_FALSE(s.ok());
  return s.status().message();
}

}  // namespace zps::train
