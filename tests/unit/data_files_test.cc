// Reading dataset files (train/data_files.cc) through loadDataset: CSV, LibSVM and Criteo
// parsing, and the errors for malformed lines and missing files.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "tests/unit/dataset_fixture.h"

namespace zps::train {
namespace {

TEST_CASE("csv: comma or whitespace separated, header line skipped, label column selectable", "[train][data]") {
  TempFile comma("a,b,label\n1,2,0\n3,4,1\n5,6,2\n");
  Dataset d = loadAll("csv:" + comma.path());
  CHECK(d.rows == 3);
  CHECK(d.num_numeric == 2);
  CHECK(d.num_classes == 3);
  CHECK(d.labels == std::vector<float>{0, 1, 2});
  // Standardised: each column has mean 0 and (population) variance 1.
  CHECK(d.numeric[0] == Approx(-1.2247449));
  CHECK(d.numeric[4] == Approx(1.2247449));

  TempFile spaces("# comment\n\n1.5  2 \t 7\n-3e1 4 8\n");
  Dataset w = loadAll("csv:" + spaces.path());
  CHECK(w.rows == 2);
  CHECK(w.num_numeric == 2);
  // kAuto calls integer labels in [0, 100) class indices; an explicit task overrides that guess.
  CHECK(w.num_classes == 9);
  LoadOptions reg = noSplit();
  reg.task = Task::kRegression;
  CHECK(loadAll("csv:" + spaces.path(), reg).isRegression());

  LoadOptions first = noSplit();
  first.label_column = 0;
  Dataset f = loadAll("csv:" + comma.path(), first);
  CHECK(f.labels == std::vector<float>{1, 3, 5});
  CHECK(f.num_classes == 6);
  LoadOptions middle = noSplit();
  middle.label_column = -2;
  CHECK(loadAll("csv:" + comma.path(), middle).labels == std::vector<float>{2, 4, 6});

  TempFile fractional("0.5,1.25\n1.5,2.75\n");
  CHECK(loadAll("csv:" + fractional.path()).isRegression());
}

TEST_CASE("csv: every malformed line names file and line", "[train][data]") {
  SECTION("not a number") {
    TempFile t("x,y,l\n1,2,0\n\n3,abc,1\n");
    const std::string e = errorOf("csv:" + t.path());
    CHECK_THAT(e, Catch::Contains(t.path() + ":4:"));
    CHECK_THAT(e, Catch::Contains("'abc'"));
    CHECK_THAT(e, Catch::Contains("column 2"));
  }
  SECTION("wrong column count") {
    TempFile t("1,2,0\n3,4,1\n5,6\n");
    const std::string e = errorOf("csv:" + t.path());
    CHECK_THAT(e, Catch::Contains(t.path() + ":3: expected 3 columns (as on line 1), got 2"));
  }
  SECTION("empty field") {
    TempFile t("1,2,0\n3,,1\n");
    CHECK_THAT(errorOf("csv:" + t.path()), Catch::Contains(t.path() + ":2: column 2 is empty"));
  }
  SECTION("non-finite value") {
    TempFile t("1,2,0\n3,nan,1\n");
    CHECK_THAT(errorOf("csv:" + t.path()), Catch::Contains(t.path() + ":2:"));
  }
  SECTION("a value float32 cannot hold") {
    TempFile t("x,y,l\n1,2,0\n3,-1e39,1\n");
    CHECK_THAT(errorOf("csv:" + t.path()),
               Catch::Contains(t.path() + ":3: column 2: '-1e39' is outside float32's range"));
    TempFile first("1e39,2,0\n3,4,1\n");  // a numeric first line is a row, not a header
    CHECK_THAT(errorOf("csv:" + first.path()), Catch::Contains(first.path() + ":1: column 1:"));
    TempFile big("3.4e38,2,0\n3,4,1\n");  // the largest floats are fine
    CHECK(loadAll("csv:" + big.path()).rows == 2);
  }
  SECTION("only the first line may be a header") {
    TempFile t("a,b,c\nd,e,f\n1,2,3\n");
    CHECK_THAT(errorOf("csv:" + t.path()), Catch::Contains(t.path() + ":2:"));
  }
  SECTION("bad class label with an explicit task") {
    TempFile t("1,2,0\n3,4,1.5\n");
    LoadOptions o = noSplit();
    o.task = Task::kClassification;
    CHECK_THAT(errorOf("csv:" + t.path(), o), Catch::Contains(t.path() + ":2: label 1.5"));
  }
  SECTION("label column out of range") {
    TempFile t("1,2,0\n");
    LoadOptions o = noSplit();
    o.label_column = 3;
    CHECK_THAT(errorOf("csv:" + t.path(), o), Catch::Contains("label column 3 is out of range"));
    o.label_column = -4;
    CHECK_THAT(errorOf("csv:" + t.path(), o), Catch::Contains("label column -4 is out of range"));
  }
  SECTION("a single column") {
    TempFile t("1\n2\n");
    CHECK_THAT(errorOf("csv:" + t.path()), Catch::Contains("at least 2 columns"));
  }
}

TEST_CASE("a dataset with no rows is an error", "[train][data]") {
  for (const std::string contents : {"", "\n\n# nothing\n", "a,b,label\n"}) {
    TempFile t(contents);
    auto s = loadDataset("csv:" + t.path(), LoadOptions());
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.status().message(), Catch::Contains("no data rows"));
    auto l = loadDataset("libsvm:" + t.path(), LoadOptions());
    REQUIRE_FALSE(l.ok());
    CHECK(l.status().code() == StatusCode::kInvalidArgument);
  }
  LoadOptions o;
  o.synthetic_rows = 0;
  CHECK(loadDataset("synthetic-regression", o).ok());  // 0 means the default size
}

TEST_CASE("missing files and unknown specs give clear errors", "[train][data]") {
  auto s = loadDataset("csv:/nonexistent/zps/x.csv", LoadOptions());
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().code() == StatusCode::kNotFound);
  CHECK_THAT(s.status().message(), Catch::Contains("/nonexistent/zps/x.csv"));

  TempFile empty_dir("");
  LoadOptions o;
  o.data_dir = empty_dir.dir();
  auto d = loadDataset("digits", o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kNotFound);
  CHECK_THAT(d.status().message(), Catch::Contains("tools/fetch-datasets.sh"));

  auto u = loadDataset("mnist", LoadOptions());
  REQUIRE_FALSE(u.ok());
  CHECK_THAT(u.status().message(), Catch::Contains("unknown dataset 'mnist'"));
  CHECK_THAT(u.status().message(), Catch::Contains("digits"));

  LoadOptions bad;
  bad.test_fraction = 1.0;
  CHECK_FALSE(loadDataset("synthetic-regression", bad).ok());
  bad.test_fraction = -0.1;
  CHECK_FALSE(loadDataset("synthetic-regression", bad).ok());
}

TEST_CASE("libsvm: sparse lines become dense rows", "[train][data]") {
  TempFile t("+1 1:0.5 3:2 # a comment\n-1 2:1\n\n+1 qid:3 1:1.5\n");
  LoadOptions o = noSplit();
  Dataset d = loadAll("libsvm:" + t.path(), o);
  CHECK(d.rows == 3);
  CHECK(d.num_numeric == 3);  // 1-based indices up to 3
  CHECK(d.num_classes == 2);
  CHECK(d.labels == std::vector<float>{1, 0, 1});

  TempFile zero("0 0:1 2:1\n1 1:1\n");
  Dataset z = loadAll("libsvm:" + zero.path());
  CHECK(z.num_numeric == 3);  // an index 0 means 0-based
  CHECK(z.labels == std::vector<float>{0, 1});

  // A 0-based file that never sets feature 0: auto reads it 1-based (and says so on stderr); base 0
  // reads it as written, base 1 refuses an index 0.
  TempFile no_zero("1 1:5 3:7\n0 2:1\n");
  CHECK(loadAll("libsvm:" + no_zero.path()).num_numeric == 3);
  LoadOptions zero_based = noSplit();
  zero_based.libsvm_base = 0;
  Dataset zb = loadAll("libsvm:" + no_zero.path(), zero_based);
  REQUIRE(zb.num_numeric == 4);
  CHECK(zb.rows == 2);
  // Feature 1 is column 1 and feature 3 column 3 (standardised over the 2 rows: present is +1).
  CHECK(zb.numericRow(0)[1] > 0);
  CHECK(zb.numericRow(0)[3] > 0);
  CHECK(zb.numericRow(1)[2] > 0);
  CHECK(zb.numericRow(0)[0] == 0.0f);  // never set: a constant column
  LoadOptions one_based = noSplit();
  one_based.libsvm_base = 1;
  CHECK_THAT(errorOf("libsvm:" + zero.path(), one_based), Catch::Contains(zero.path() + ":1: feature index 0"));

  TempFile reg("1.5 1:1\n-2.25 1:2\n");
  CHECK(loadAll("libsvm:" + reg.path()).isRegression());

  SECTION("malformed lines") {
    TempFile bad_value("1 1:0.5\n0 2:zz\n");
    CHECK_THAT(errorOf("libsvm:" + bad_value.path()), Catch::Contains(bad_value.path() + ":2:"));
    TempFile bad_token("1 1:0.5\n0 7\n");
    CHECK_THAT(errorOf("libsvm:" + bad_token.path()),
               Catch::Contains(bad_token.path() + ":2: feature '7' is not of the form index:value"));
    TempFile dup("1 1:0.5 1:2\n");
    CHECK_THAT(errorOf("libsvm:" + dup.path()), Catch::Contains(dup.path() + ":1: feature index 1 appears twice"));
    TempFile no_label("1:0.5\n");
    CHECK_THAT(errorOf("libsvm:" + no_label.path()), Catch::Contains(no_label.path() + ":1:"));
    TempFile huge("1 1:0.5\n0 2:1e40\n");
    CHECK_THAT(errorOf("libsvm:" + huge.path()),
               Catch::Contains(huge.path() + ":2: feature 2: '1e40' is outside float32's range"));
    TempFile bad_index("1 -3:1\n");
    CHECK_THAT(errorOf("libsvm:" + bad_index.path()), Catch::Contains(bad_index.path() + ":1:"));
  }
}

std::string criteoLine(const std::string& label, const std::string& n1, const std::string& c1) {
  std::string line = label + "\t" + n1;
  for (int j = 1; j < 13; ++j) line += "\t" + std::to_string(j);
  line += "\t" + c1;
  for (int f = 1; f < 26; ++f) line += "\t" + std::string(f % 3 ? "68fd1e64" : "");
  return line + "\n";
}

TEST_CASE("criteo: tab-separated label, 13 numeric, 26 categorical, missing values allowed", "[train][data]") {
  TempFile t(criteoLine("1", "5", "05db9164") + criteoLine("0", "", "") + criteoLine("0", "-2", "05db9164"));
  Dataset d = loadAll("criteo:" + t.path());
  CHECK(d.rows == 3);
  CHECK(d.num_numeric == 13);
  CHECK(d.num_categorical == 26);
  CHECK(d.num_classes == 2);
  CHECK(d.labels == std::vector<float>{1, 0, 0});
  // The same string in the same field hashes to the same id; in another field to another one.
  CHECK(d.categoricalRow(0)[0] == d.categoricalRow(2)[0]);
  CHECK(d.categoricalRow(0)[0] != d.categoricalRow(1)[0]);
  CHECK(d.categoricalRow(0)[1] != d.categoricalRow(0)[2]);
  CHECK(d.categoricalRow(0)[1] == d.categoricalRow(1)[1]);
  CHECK(categoricalId(1, 42) != categoricalId(2, 42));
  // An empty numeric field is missing, not 0: it becomes the mean of the present values (0 once
  // standardised), while a real 0 stands apart from it.
  TempFile missing(criteoLine("1", "0", "a") + criteoLine("0", "", "a") + criteoLine("0", "8", "a"));
  Dataset m = loadAll("criteo:" + missing.path());
  CHECK(m.numericRow(1)[0] == 0.0f);
  CHECK(m.numericRow(0)[0] < -0.5f);
  CHECK(m.numericRow(2)[0] > 0.5f);

  SECTION("malformed lines") {
    TempFile short_line(criteoLine("1", "5", "a") + "1\t2\t3\n");
    CHECK_THAT(errorOf("criteo:" + short_line.path()),
               Catch::Contains(short_line.path() + ":2: expected 40 tab-separated fields"));
    TempFile bad_label(criteoLine("2", "5", "a"));
    CHECK_THAT(errorOf("criteo:" + bad_label.path()),
               Catch::Contains(bad_label.path() + ":1: label '2' is not 0 or 1"));
    TempFile bad_number(criteoLine("1", "x5", "a"));
    CHECK_THAT(errorOf("criteo:" + bad_number.path()), Catch::Contains(bad_number.path() + ":1: numeric field I1"));
  }
}

}  // namespace
}  // namespace zps::train
