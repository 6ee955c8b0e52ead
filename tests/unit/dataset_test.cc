// Tests for the named datasets, generators and split (train/dataset.h); the file readers'
// tests are in data_files_test.cc. The named real datasets come from tools/fetch-datasets.sh; a
// missing data folder fails the test with that hint rather than skipping it.
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

#include "tests/unit/dataset_fixture.h"
#include "train/dataset.h"
#include "train/split.h"

namespace zps::train {
namespace {

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
