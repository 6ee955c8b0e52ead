// Tests for the dataset readers, generators and split (worker/train/dataset.h). The named real
// datasets come from tools/fetch-datasets.sh; a missing data folder fails the test with that hint
// rather than skipping it.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "worker/train/dataset.h"
#include "worker/train/split.h"

namespace zps::train {
namespace {

namespace fs = std::filesystem;

std::string dataDir() {
  if (const char* e = std::getenv("ZPS_DATA_DIR"); e != nullptr && *e != '\0') return e;
  return std::string(ZPS_SOURCE_DIR) + "/data";
}

void requireRealData() {
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

LoadOptions noSplit() {
  LoadOptions o;
  o.test_fraction = 0;
  return o;
}

// Loads a file spec without a test split; the rows stay in file order, standardised over all rows.
Dataset loadAll(const std::string& spec, LoadOptions o = noSplit()) {
  o.test_fraction = 0;
  auto s = loadDataset(spec, o);
  REQUIRE(s.ok());
  return std::move(s).value().train;
}

std::string errorOf(const std::string& spec, LoadOptions o = noSplit()) {
  auto s = loadDataset(spec, o);
  REQUIRE_FALSE(s.ok());
  return s.status().message();
}

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

TEST_CASE("named datasets load with their known shapes", "[train][data]") {
  requireRealData();
  LoadOptions o;
  o.data_dir = dataDir();
  struct Expect {
    const char* name;
    size_t rows, features;
    int classes;
  };
  for (const Expect& e :
       {Expect{"digits", 1797, 64, 10}, Expect{"breast_cancer", 569, 30, 2}, Expect{"diabetes", 442, 10, 0}}) {
    INFO(e.name);
    auto s = loadDataset(e.name, o);
    REQUIRE(s.ok());
    const Split& split = *s;
    CHECK(split.train.rows + split.test.rows == e.rows);
    CHECK(split.test.rows == static_cast<size_t>(std::llround(e.rows * 0.2)));
    CHECK(split.train.num_numeric == e.features);
    CHECK(split.test.num_numeric == e.features);
    CHECK(split.train.num_classes == e.classes);
    CHECK(split.train.num_categorical == 0);
    CHECK(split.train.numeric.size() == split.train.rows * e.features);
    CHECK(split.train.labels.size() == split.train.rows);
    // Standardised with the train split's statistics: mean 0, and variance 1 or 0 (constant
    // column).
    for (size_t j = 0; j < e.features; ++j) {
      double mean = 0, sq = 0;
      for (size_t r = 0; r < split.train.rows; ++r) mean += split.train.numericRow(r)[j];
      mean /= split.train.rows;
      for (size_t r = 0; r < split.train.rows; ++r) {
        sq += std::pow(split.train.numericRow(r)[j] - mean, 2);
      }
      const double var = sq / split.train.rows;
      CHECK(std::fabs(mean) < 1e-4);
      CHECK((std::fabs(var - 1) < 1e-3 || var < 1e-9));
    }
  }
  // Regression targets stay in their units (diabetes: 25..346).
  auto diabetes = loadDataset("diabetes", o);
  REQUIRE(diabetes.ok());
  const auto& y = diabetes->train.labels;
  CHECK(*std::min_element(y.begin(), y.end()) >= 25);
  CHECK(*std::max_element(y.begin(), y.end()) <= 346);
}

TEST_CASE("the split is deterministic and seeded", "[train][data]") {
  LoadOptions o;
  o.synthetic_rows = 500;
  auto a = loadDataset("synthetic-regression", o);
  auto b = loadDataset("synthetic-regression", o);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->train.rows == 400);
  CHECK(a->test.rows == 100);
  CHECK(a->train.numeric == b->train.numeric);
  CHECK(a->test.labels == b->test.labels);
  o.seed = 2;
  auto c = loadDataset("synthetic-regression", o);
  REQUIRE(c.ok());
  CHECK(c->train.labels != a->train.labels);

  o.test_fraction = 0;
  auto all = loadDataset("synthetic-regression", o);
  REQUIRE(all.ok());
  CHECK(all->train.rows == 500);
  CHECK(all->test.rows == 0);
}

// Rows per class of a dataset's labels.
std::vector<size_t> classCounts(const Dataset& d) {
  std::vector<size_t> n(static_cast<size_t>(d.num_classes), 0);
  for (float l : d.labels) ++n[static_cast<size_t>(l)];
  return n;
}

TEST_CASE("the stratified split keeps every class's share within one row", "[train][data]") {
  requireRealData();
  LoadOptions o;
  o.data_dir = dataDir();
  for (const char* name : {"digits", "breast_cancer"}) {
    for (double fraction : {0.2, 0.33, 0.05}) {
      for (uint64_t seed : {1, 2, 3}) {
        INFO(name << " test fraction " << fraction << " seed " << seed);
        o.test_fraction = fraction;
        o.seed = seed;
        auto s = loadDataset(name, o);  // stratified: the default for classification
        REQUIRE(s.ok());
        const size_t rows = s->train.rows + s->test.rows;
        CHECK(s->test.rows == static_cast<size_t>(std::llround(static_cast<double>(rows) * fraction)));
        const std::vector<size_t> test = classCounts(s->test), train = classCounts(s->train);
        for (size_t c = 0; c < test.size(); ++c) {
          const double exact = static_cast<double>(test[c] + train[c]) * fraction;
          CHECK(std::fabs(static_cast<double>(test[c]) - exact) < 1.0);
        }
      }
    }
  }
  // A random split of the same data strays further (which is why stratified is the default).
  o.test_fraction = 0.2;
  double worst = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    o.seed = seed;
    o.split = SplitKind::kRandom;
    auto s = loadDataset("digits", o);
    REQUIRE(s.ok());
    const std::vector<size_t> test = classCounts(s->test), train = classCounts(s->train);
    for (size_t c = 0; c < test.size(); ++c)
      worst = std::max(worst, std::fabs(static_cast<double>(test[c]) - 0.2 * static_cast<double>(test[c] + train[c])));
  }
  CHECK(worst > 1.0);
}

TEST_CASE("split kinds: random is the permutation's prefix, stratified needs classes", "[train][data]") {
  LoadOptions o;
  o.synthetic_rows = 500;
  o.split = SplitKind::kStratified;
  auto refused = loadDataset("synthetic-regression", o);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("--split random"));
  o.split = SplitKind::kAuto;
  auto automatic = loadDataset("synthetic-regression", o);
  o.split = SplitKind::kRandom;
  auto random = loadDataset("synthetic-regression", o);
  REQUIRE(automatic.ok());
  REQUIRE(random.ok());
  CHECK(automatic->test.labels == random->test.labels);  // auto is random for regression
  CHECK(splitKindFromName("stratified").value() == SplitKind::kStratified);
  CHECK(splitKindFromName("random").value() == SplitKind::kRandom);
  CHECK(splitKindFromName("auto").value() == SplitKind::kAuto);
  CHECK_THAT(splitKindFromName("kfold").status().message(), Catch::Contains("valid: auto, stratified, random"));
}

TEST_CASE("synthetic data: shapes, determinism, a known click model", "[train][data]") {
  Dataset r = makeSyntheticRegression(100, 7);
  CHECK(r.rows == 100);
  CHECK(r.num_numeric == kSyntheticRegressionFeatures);
  CHECK(r.isRegression());
  CHECK(makeSyntheticRegression(100, 7).numeric == r.numeric);

  Dataset c = makeSyntheticCtr(20000, 3);
  CHECK(c.rows == 20000);
  CHECK(c.num_numeric == kCtrNumericFields);
  CHECK(c.num_categorical == kCtrCategoricalFields);
  CHECK(c.num_classes == 2);
  CHECK(c.true_probability.size() == c.rows);
  CHECK(makeSyntheticCtr(20000, 3).categorical == c.categorical);
  CHECK(makeSyntheticCtr(20000, 4).labels != c.labels);
  double clicks = 0, expected = 0;
  for (size_t i = 0; i < c.rows; ++i) {
    clicks += c.labels[i];
    expected += c.true_probability[i];
    REQUIRE(c.true_probability[i] > 0.0f);
    REQUIRE(c.true_probability[i] < 1.0f);
  }
  // Labels are drawn from true_probability: the click count matches its sum within a few sigma.
  CHECK(std::fabs(clicks - expected) < 4 * std::sqrt(expected));
  CHECK(clicks / c.rows > 0.1);
  CHECK(clicks / c.rows < 0.4);
  // Ids never repeat across fields; small fields reuse a few ids, the tail makes many distinct
  // ones.
  std::vector<std::set<uint64_t>> per_field(kCtrCategoricalFields);
  for (size_t i = 0; i < c.rows; ++i) {
    for (size_t f = 0; f < kCtrCategoricalFields; ++f) per_field[f].insert(c.categoricalRow(i)[f]);
  }
  std::set<uint64_t> all;
  size_t total = 0;
  for (const auto& s : per_field) {
    all.insert(s.begin(), s.end());
    total += s.size();
  }
  CHECK(all.size() == total);
  CHECK(per_field[0].size() < 0.1 * c.rows);
  CHECK(per_field.back().size() > 0.1 * c.rows);
}

TEST_CASE("epochOrder is a seeded permutation, different per epoch", "[train][data]") {
  const auto a = epochOrder(1000, 1, 0);
  CHECK(a == epochOrder(1000, 1, 0));
  CHECK(a != epochOrder(1000, 1, 1));
  CHECK(a != epochOrder(1000, 2, 0));
  std::vector<size_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) REQUIRE(sorted[i] == i);
  CHECK(epochOrder(0, 1, 0).empty());
}

TEST_CASE("batchSlice cuts a global batch into contiguous per-rank slices", "[train][data]") {
  using Slice = std::pair<size_t, size_t>;
  CHECK(batchSlice(10, 0, 1) == Slice{0, 10});
  CHECK(batchSlice(10, 0, 2) == Slice{0, 5});
  CHECK(batchSlice(10, 1, 2) == Slice{5, 10});
  CHECK(batchSlice(7, 0, 3) == Slice{0, 3});
  CHECK(batchSlice(7, 1, 3) == Slice{3, 5});
  CHECK(batchSlice(7, 2, 3) == Slice{5, 7});
  CHECK(batchSlice(1, 1, 2) == Slice{1, 1});  // a short last batch may leave a rank nothing
  for (size_t n : {0, 1, 5, 64, 101}) {
    for (int w : {1, 2, 3, 4, 7}) {
      size_t next = 0;
      for (int r = 0; r < w; ++r) {
        const Slice s = batchSlice(n, r, w);
        REQUIRE(s.first == next);
        REQUIRE(s.second >= s.first);
        next = s.second;
      }
      REQUIRE(next == n);
    }
  }
}

TEST_CASE("selectRows keeps the chosen rows in order", "[train][data]") {
  Dataset c = makeSyntheticCtr(50, 1);
  Dataset s = selectRows(c, {7, 3});
  CHECK(s.rows == 2);
  CHECK(s.labels == std::vector<float>{c.labels[7], c.labels[3]});
  CHECK(s.categoricalRow(1)[5] == c.categoricalRow(3)[5]);
  CHECK(s.numericRow(0)[2] == c.numericRow(7)[2]);
  CHECK(s.true_probability[1] == c.true_probability[3]);
}

}  // namespace
}  // namespace zps::train
