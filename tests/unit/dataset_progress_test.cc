// Tests for the progress lines of long dataset work (train/dataset_progress.h): quiet for
// short work, plain lines for a log, one line redrawn in place on a terminal.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "train/dataset_progress.h"

namespace zps::train {
namespace {

using std::chrono::milliseconds;

DatasetProgress::Options capture(std::vector<std::string>* out, milliseconds first, bool terminal) {
  DatasetProgress::Options o;
  o.first = first;
  o.every = milliseconds(0);
  o.terminal = terminal;
  o.write = [out](const std::string& text) { out->push_back(text); };
  return o;
}

TEST_CASE("dataset progress: quiet when the work ends before the first report is due", "[dataset_progress]") {
  std::vector<std::string> out;
  {
    DatasetProgress p("generating synthetic-ctr", 5000, "rows", capture(&out, milliseconds(60000), false));
    for (int i = 0; i < 5000; ++i) p.advance();
    p.finish();
  }
  CHECK(out.empty());
}

TEST_CASE("dataset progress: plain lines with percent and counts, then a done line", "[dataset_progress]") {
  std::vector<std::string> out;
  {
    DatasetProgress p("generating synthetic-ctr", 4096, "rows", capture(&out, milliseconds(0), false));
    for (int i = 0; i < 4096; ++i) p.advance();
    p.finish();
  }
  // The clock is read once every 1024 units: at 1024, 2048, 3072 and 4096.
  REQUIRE(out.size() == 5);
  CHECK(out[0].rfind("generating synthetic-ctr: 25% (1024 of 4096 rows), ", 0) == 0);
  CHECK(out[3].rfind("generating synthetic-ctr: 100% (4096 of 4096 rows), ", 0) == 0);
  CHECK(out[4].rfind("generating synthetic-ctr: done, 4096 rows in ", 0) == 0);
  for (const auto& line : out) {
    CHECK(line.back() == '\n');
    CHECK(line.find('\033') == std::string::npos);
  }
}

TEST_CASE("dataset progress: bytes show in MB, an unknown total shows only the amount", "[dataset_progress]") {
  std::vector<std::string> out;
  {
    DatasetProgress p("reading big.tsv", 4'000'000, "bytes", capture(&out, milliseconds(0), false));
    p.advance(1'000'000);
  }
  {
    DatasetProgress p("reading pipe", 0, "rows", capture(&out, milliseconds(0), false));
    p.advance(2048);
  }
  REQUIRE(out.size() == 2);
  CHECK(out[0].rfind("reading big.tsv: 25% (1.0 of 4.0 MB), ", 0) == 0);
  CHECK(out[1].rfind("reading pipe: 2048 rows, ", 0) == 0);
}

TEST_CASE("dataset progress: a terminal gets one line redrawn in place", "[dataset_progress]") {
  std::vector<std::string> out;
  {
    DatasetProgress p("generating synthetic-ctr", 100000, "rows", capture(&out, milliseconds(0), true));
    for (int i = 0; i < 100000; ++i) p.advance();
    p.finish();
  }
  // Redraws are at most every 0.5 s, so a fast loop draws once, then the done line replaces it.
  REQUIRE(out.size() == 2);
  CHECK(out[0].rfind("\r\033[Kgenerating synthetic-ctr: 1% (1024 of 100000 rows), ", 0) == 0);
  CHECK(out[0].find('\n') == std::string::npos);
  CHECK(out[1].rfind("\r\033[Kgenerating synthetic-ctr: done, 100000 rows in ", 0) == 0);
  CHECK(out[1].back() == '\n');

  // Work that fails midway leaves the cursor on a fresh line for the error message.
  out.clear();
  {
    DatasetProgress p("reading bad.csv", 0, "bytes", capture(&out, milliseconds(0), true));
    p.advance(4096);
  }
  REQUIRE(out.size() == 2);
  CHECK(out[1] == "\n");
}

}  // namespace
}  // namespace zps::train
