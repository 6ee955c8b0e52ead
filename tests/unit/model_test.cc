// Tests for the models (train/model.h), the embedding helpers (embedding.h) and
// single-process training (local_trainer.h): gradients against finite differences, bit-for-bit
// determinism, sum (not mean) semantics, and the single-process baselines on the real and synthetic
// datasets, which are the numbers distributed training is compared against. The baselines print
// their results with WARN.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/random_dataset.h"
#include "train/embedding.h"
#include "train/local_trainer.h"
#include "train/metrics.h"
#include "train/model.h"

namespace zps::train {
namespace {

using testing::randomData;

std::string dataDir() {
  if (const char* e = std::getenv("ZPS_DATA_DIR"); e != nullptr && *e != '\0') return e;
  return std::string(ZPS_SOURCE_DIR) + "/data";
}

Split loadOrFail(const std::string& spec) {
  LoadOptions o;
  o.data_dir = dataDir();
  auto s = loadDataset(spec, o);
  if (!s.ok()) {
    FAIL(s.status().toString() << " (or set ZPS_DATA_DIR)");
  }
  return std::move(s).value();
}

std::vector<float> randomVector(size_t n, float sd, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

std::vector<size_t> iota(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Central differences of the summed loss in each coordinate of `x` (a parameter or embedding
// buffer), compared with the analytic gradient. Float forward passes give the numeric gradient an
// error of about 1e-4 at this step; ReLU kinks are rare enough at it for the seeded data here.
void checkGradient(Model& model, std::vector<float>& params, const Dataset& data, const std::vector<size_t>& rows,
                   std::vector<float>* emb, bool of_emb) {
  const size_t np = params.size();
  const size_t ne = emb ? emb->size() : 0;
  std::vector<float> grad(np), grad_emb(ne), scratch(np), scratch_emb(ne);
  const float* e = emb ? emb->data() : nullptr;
  model.lossAndGrad(params.data(), data, rows.data(), rows.size(), e, grad.data(), emb ? grad_emb.data() : nullptr);
  std::vector<float>& x = of_emb ? *emb : params;
  const std::vector<float>& analytic = of_emb ? grad_emb : grad;
  constexpr float kStep = 3e-3f;
  size_t checked = 0;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    auto lossAt = [&](float v) {
      x[i] = v;
      const float* ep = emb ? emb->data() : nullptr;
      return model.lossAndGrad(params.data(), data, rows.data(), rows.size(), ep, scratch.data(),
                               emb ? scratch_emb.data() : nullptr);
    };
    const double up = lossAt(saved + kStep);
    const double down = lossAt(saved - kStep);
    x[i] = saved;
    const double numeric = (up - down) / (2.0 * kStep);
    const double error = std::fabs(numeric - analytic[i]) / (1e-2 + std::fabs(numeric));
    worst = std::max(worst, error);
    if (error > 2e-2) {
      FAIL_CHECK(model.describe() << (of_emb ? " embedding" : " param") << " " << i << ": analytic " << analytic[i]
                                  << ", numeric " << numeric);
    }
    ++checked;
  }
  INFO(model.describe() << ": " << checked << " coordinates, worst relative error " << worst);
  CHECK(checked == x.size());
}

TEST_CASE("linear: gradient matches finite differences, loss is squared error", "[train][models]") {
  auto model = makeLinear(5);
  CHECK(model->describe() == "linear 5-1");
  CHECK(model->numDenseParams() == 6);
  CHECK(model->outputsPerRow() == 1);
  Dataset d = randomData(8, 5, 0, 0, 1);
  REQUIRE(model->checkData(d).ok());
  std::vector<float> params = randomVector(6, 0.5f, 2);
  checkGradient(*model, params, d, iota(8), nullptr, false);

  // loss = sum (y - t)^2 exactly, with y = w.x + b.
  double expected = 0;
  for (size_t r = 0; r < d.rows; ++r) {
    double y = params[5];
    for (size_t j = 0; j < 5; ++j) y += params[j] * d.numericRow(r)[j];
    expected += (y - d.labels[r]) * (y - d.labels[r]);
  }
  std::vector<float> grad(6);
  const auto rows = iota(8);
  CHECK(model->lossAndGrad(params.data(), d, rows.data(), 8, nullptr, grad.data(), nullptr) ==
        Approx(expected).epsilon(1e-5));

  std::vector<float> init(6, 1.0f);
  model->initDense(init.data(), 7);
  for (float v : init) CHECK(v == 0.0f);
}

TEST_CASE("mlp: gradient matches finite differences", "[train][models]") {
  auto model = makeMlp(6, {7, 5}, 4);
  CHECK(model->describe() == "mlp 6-7-5-4");
  CHECK(model->numDenseParams() == 6 * 7 + 7 + 7 * 5 + 5 + 5 * 4 + 4);
  CHECK(model->outputsPerRow() == 4);
  Dataset d = randomData(9, 6, 0, 4, 3);
  REQUIRE(model->checkData(d).ok());
  std::vector<float> params(model->numDenseParams());
  model->initDense(params.data(), 11);
  // Non-zero biases, so their gradients are exercised away from the symmetric start.
  const auto noise = randomVector(params.size(), 0.05f, 4);
  for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
  checkGradient(*model, params, d, iota(9), nullptr, false);

  // No hidden layer is softmax regression.
  auto flat = makeMlp(6, {}, 4);
  std::vector<float> flat_params = randomVector(flat->numDenseParams(), 0.3f, 5);
  checkGradient(*flat, flat_params, d, iota(9), nullptr, false);
}

TEST_CASE("ctr: dense and embedding gradients match finite differences", "[train][models]") {
  const size_t numeric = 3, fields = 4, dim = 2, n = 6;
  auto model = makeCtr(numeric, fields, dim, {5, 3});
  CHECK(model->describe() == "ctr 4x2+3-5-3-1");
  CHECK(model->embeddingDim() == dim);
  CHECK(model->outputsPerRow() == 1);
  CHECK(model->numDenseParams() == (fields * dim + numeric) * 5 + 5 + 5 * 3 + 3 + 3 + 1);
  Dataset d = randomData(n, numeric, fields, 2, 6);
  REQUIRE(model->checkData(d).ok());
  std::vector<float> params(model->numDenseParams());
  model->initDense(params.data(), 12);
  const auto noise = randomVector(params.size(), 0.05f, 7);
  for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
  std::vector<float> emb = randomVector(n * fields * dim, 0.5f, 8);
  checkGradient(*model, params, d, iota(n), &emb, false);
  checkGradient(*model, params, d, iota(n), &emb, true);
}

TEST_CASE("gradients are sums over the batch and bit-for-bit deterministic", "[train][models]") {
  Dataset d = randomData(64, 10, 0, 3, 9);
  auto a = makeMlp(10, {16}, 3);
  auto b = makeMlp(10, {16}, 3);
  std::vector<float> params(a->numDenseParams());
  a->initDense(params.data(), 1);
  const auto rows = iota(64);
  std::vector<float> g1(params.size()), g2(params.size()), g3(params.size());
  const double l1 = a->lossAndGrad(params.data(), d, rows.data(), 64, nullptr, g1.data(), nullptr);
  const double l2 = a->lossAndGrad(params.data(), d, rows.data(), 64, nullptr, g2.data(), nullptr);
  const double l3 = b->lossAndGrad(params.data(), d, rows.data(), 64, nullptr, g3.data(), nullptr);
  CHECK(l1 == l2);
  CHECK(l1 == l3);
  CHECK(std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(g1.data(), g3.data(), g1.size() * sizeof(float)) == 0);

  // Two halves add up to the whole batch: what lets W workers' sums stand for one big batch.
  std::vector<float> h1(params.size()), h2(params.size());
  const double la = a->lossAndGrad(params.data(), d, rows.data(), 32, nullptr, h1.data(), nullptr);
  const double lb = a->lossAndGrad(params.data(), d, rows.data() + 32, 32, nullptr, h2.data(), nullptr);
  CHECK(la + lb == Approx(l1).epsilon(1e-6));
  for (size_t i = 0; i < params.size(); ++i) {
    REQUIRE(h1[i] + h2[i] == Approx(g1[i]).epsilon(1e-4).margin(1e-5));
  }

  // The same holds for ctr, embeddings included.
  Dataset c = randomData(32, 3, 4, 2, 10);
  auto ctr = makeCtr(3, 4, 4, {8});
  std::vector<float> cp(ctr->numDenseParams());
  ctr->initDense(cp.data(), 2);
  std::vector<float> emb = randomVector(32 * 4 * 4, 0.1f, 11);
  std::vector<float> cg1(cp.size()), cg2(cp.size()), ge1(emb.size()), ge2(emb.size());
  const auto crows = iota(32);
  const double c1 = ctr->lossAndGrad(cp.data(), c, crows.data(), 32, emb.data(), cg1.data(), ge1.data());
  const double c2 = ctr->lossAndGrad(cp.data(), c, crows.data(), 32, emb.data(), cg2.data(), ge2.data());
  CHECK(c1 == c2);
  CHECK(cg1 == cg2);
  CHECK(ge1 == ge2);
}

TEST_CASE("predict gives probabilities and the same loss as lossAndGrad", "[train][models]") {
  Dataset d = randomData(20, 5, 0, 3, 12);
  auto model = makeMlp(5, {8}, 3);
  std::vector<float> params(model->numDenseParams());
  model->initDense(params.data(), 3);
  const auto rows = iota(20);
  std::vector<float> out(20 * 3), grad(params.size());
  double loss = 0;
  model->predict(params.data(), d, rows.data(), 20, nullptr, out.data(), &loss);
  CHECK(loss == Approx(model->lossAndGrad(params.data(), d, rows.data(), 20, nullptr, grad.data(), nullptr)));
  for (size_t r = 0; r < 20; ++r) {
    CHECK(out[r * 3] + out[r * 3 + 1] + out[r * 3 + 2] == Approx(1.0f));
  }
  // A fresh network's logits are of order one: the first loss is a few times log(3), not huge.
  CHECK(loss / 20 > 0.5 * std::log(3.0));
  CHECK(loss / 20 < 3 * std::log(3.0));
}

TEST_CASE("initialisation is deterministic and seeded", "[train][models]") {
  auto m = makeMlp(64, {128}, 10);
  std::vector<float> a(m->numDenseParams()), b(a.size()), c(a.size());
  m->initDense(a.data(), 1);
  m->initDense(b.data(), 1);
  m->initDense(c.data(), 2);
  CHECK(a == b);
  CHECK(a != c);
  // He for the hidden layer: standard deviation sqrt(2 / 64).
  double sq = 0;
  for (size_t i = 0; i < 64 * 128; ++i) sq += a[i] * a[i];
  CHECK(std::sqrt(sq / (64 * 128)) == Approx(std::sqrt(2.0 / 64)).epsilon(0.05));
  // Biases start at zero.
  for (size_t i = 64 * 128; i < 64 * 128 + 128; ++i) REQUIRE(a[i] == 0.0f);
}

TEST_CASE("makeModel checks the model against the data", "[train][models]") {
  Dataset reg = randomData(4, 3, 0, 0, 1);
  Dataset cls = randomData(4, 3, 0, 3, 1);
  Dataset ctr = randomData(4, 3, 2, 2, 1);
  CHECK(makeModel("linear", reg, {}, 0).ok());
  CHECK(makeModel("mlp", cls, {4}, 0).ok());
  CHECK(makeModel("ctr", ctr, {4}, 8).ok());
  auto expectError = [](StatusOr<std::unique_ptr<Model>> m, const std::string& text) {
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(m.status().message(), Catch::Contains(text));
  };
  expectError(makeModel("resnet", reg, {}, 0), "unknown model 'resnet' (valid: linear, logreg, mlp, ctr)");
  expectError(makeModel("logreg", reg, {}, 0), "model 'logreg' does classification");
  auto logreg = makeModel("logreg", cls, {4}, 0);  // hidden sizes do not apply to it
  REQUIRE(logreg.ok());
  CHECK((*logreg)->describe() == "logreg 3-3");
  std::vector<float> start((*logreg)->numDenseParams(), 1.0f);
  (*logreg)->initDense(start.data(), 7);
  CHECK(start == std::vector<float>(12, 0.0f));  // a convex loss: starts at zero
  expectError(makeModel("linear", cls, {}, 0), "does regression");
  expectError(makeModel("mlp", reg, {4}, 0), "does classification");
  expectError(makeModel("mlp", ctr, {4}, 0), "use ctr");
  expectError(makeModel("ctr", cls, {4}, 8), "needs categorical fields");
  expectError(makeModel("mlp", cls, {0}, 0), "positive");

  auto mlp = makeMlp(3, {4}, 3);
  Dataset wider = randomData(4, 5, 0, 3, 1);
  CHECK_THAT(mlp->checkData(wider).message(), Catch::Contains("has 5 features"));
  Dataset bad_label = cls;
  bad_label.labels[2] = 3;
  CHECK_THAT(mlp->checkData(bad_label).message(), Catch::Contains("label 3"));
}

TEST_CASE("batch ids: distinct sorted ids, expand and reduce", "[train][models]") {
  Dataset d = randomData(10, 1, 3, 2, 4);
  const std::vector<size_t> rows{2, 5, 7, 2};
  BatchIds ids;
  collectBatchIds(d, rows.data(), rows.size(), &ids);
  CHECK(std::is_sorted(ids.unique.begin(), ids.unique.end()));
  CHECK(std::adjacent_find(ids.unique.begin(), ids.unique.end()) == ids.unique.end());
  REQUIRE(ids.slot_of.size() == rows.size() * 3);
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t f = 0; f < 3; ++f) {
      CHECK(ids.unique[ids.slot_of[i * 3 + f]] == d.categoricalRow(rows[i])[f]);
    }
  }
  // Row 2 appears twice, so its ids come back with gradient counted twice.
  const size_t dim = 2;
  std::vector<float> unique_rows(ids.unique.size() * dim);
  for (size_t i = 0; i < unique_rows.size(); ++i) unique_rows[i] = static_cast<float>(i);
  std::vector<float> emb(ids.slot_of.size() * dim);
  expandRows(ids, unique_rows.data(), dim, emb.data());
  std::vector<float> reduced(unique_rows.size());
  reduceRowGrads(ids, emb.data(), dim, reduced.data());
  for (size_t u = 0; u < ids.unique.size(); ++u) {
    size_t uses = 0;
    for (uint32_t s : ids.slot_of) uses += s == u;
    CHECK(reduced[u * dim] == unique_rows[u * dim] * uses);
  }
}

TEST_CASE("local embedding table: rows on first touch, per-row update counts", "[train][models]") {
  kernels::OptimizerConfig sgd;
  sgd.kind = kernels::OptimizerKind::kSgd;
  sgd.lr = 0.5f;
  LocalEmbeddingTable table(3, sgd, 0.01f, 9);
  const std::vector<uint64_t> ids{11, 22};
  std::vector<float> out(6);
  table.lookup(ids.data(), 1, out.data(), /*create=*/false);
  CHECK(table.size() == 0);
  table.lookup(ids.data(), 2, out.data());
  CHECK(table.size() == 2);
  std::vector<float> expect(3);
  kernels::initEmbeddingRow(22, 9, 0.01f, expect.data(), 3);
  CHECK(std::equal(expect.begin(), expect.end(), out.begin() + 3));
  const std::vector<float> grads{1, 1, 1};
  table.apply(ids.data() + 1, 1, grads.data());
  table.lookup(ids.data() + 1, 1, out.data());
  CHECK(out[0] == Approx(expect[0] - 0.5f));

  // Adam counts steps per row: a row first updated late still gets a step-1 bias correction.
  kernels::OptimizerConfig adam;
  adam.kind = kernels::OptimizerKind::kAdam;
  adam.lr = 0.1f;
  LocalEmbeddingTable t2(1, adam, 0.0f, 1);
  const uint64_t a = 1, b = 2;
  const float g = 1.0f;
  t2.apply(&a, 1, &g);
  t2.apply(&a, 1, &g);
  t2.apply(&b, 1, &g);
  float va, vb;
  t2.lookup(&a, 1, &va);
  t2.lookup(&b, 1, &vb);
  CHECK(va == Approx(-0.2f));
  CHECK(vb == Approx(-0.1f));
}

// ---- Single-process baselines. The hyper-parameters here are the ones distributed runs use. ----

kernels::OptimizerConfig optimizer(kernels::OptimizerKind kind, float lr) {
  kernels::OptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  return c;
}

TrainResult trainOrFail(const Split& split, const TrainOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto r = trainLocal(split, options);
  if (!r.ok()) FAIL(r.status().toString());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ostringstream os;
  os << "baseline " << split.train.name << " " << r->model << ": " << options.epochs << " epochs, batch "
     << options.batch_size << ", " << kernels::optimizerName(options.optimizer.kind) << " lr " << options.optimizer.lr
     << "; final train loss " << r->epochs.back().train_loss << "; test " << r->test.summary() << "; " << seconds
     << " s";
  WARN(os.str());
  return std::move(r).value();
}

TEST_CASE("baseline: digits mlp reaches test accuracy >= 0.95", "[train][baseline]") {
  const Split split = loadOrFail("digits");
  TrainOptions o;
  o.model = "mlp";
  o.hidden = {128};
  o.epochs = 20;
  o.batch_size = 64;
  o.optimizer = optimizer(kernels::OptimizerKind::kAdam, 0.003f);
  const TrainResult r = trainOrFail(split, o);
  CHECK(r.test.accuracy >= 0.95);
  CHECK(r.epochs.back().train_loss < r.epochs.front().train_loss);
}

TEST_CASE("baseline: breast_cancer mlp reaches test accuracy >= 0.94", "[train][baseline]") {
  const Split split = loadOrFail("breast_cancer");
  TrainOptions o;
  o.model = "mlp";
  o.hidden = {32};
  o.epochs = 20;
  o.batch_size = 64;
  o.optimizer = optimizer(kernels::OptimizerKind::kAdam, 0.003f);
  const TrainResult r = trainOrFail(split, o);
  CHECK(r.test.accuracy >= 0.94);
}

TEST_CASE("baseline: diabetes linear within 10% of the closed-form least squares", "[train][baseline]") {
  const Split split = loadOrFail("diabetes");
  TrainOptions o;
  o.model = "linear";
  o.epochs = 100;
  o.batch_size = 64;
  o.optimizer = optimizer(kernels::OptimizerKind::kSgd, 0.05f);
  const TrainResult r = trainOrFail(split, o);
  const double closed_form = leastSquaresTestMse(split.train, split.test);
  WARN("diabetes closed-form least-squares test mse " << closed_form << "; trained/closed-form "
                                                      << r.test.mse / closed_form);
  CHECK(r.test.mse <= 1.1 * closed_form);
}

TEST_CASE("baseline: synthetic-regression linear reaches the noise floor", "[train][baseline]") {
  const Split split = loadOrFail("synthetic-regression");
  TrainOptions o;
  o.model = "linear";
  o.epochs = 10;
  o.batch_size = 64;
  o.optimizer = optimizer(kernels::OptimizerKind::kSgd, 0.02f);
  const TrainResult r = trainOrFail(split, o);
  const double closed_form = leastSquaresTestMse(split.train, split.test);
  CHECK(closed_form == Approx(0.25).epsilon(0.2));  // the generator's noise variance
  CHECK(r.test.mse <= 1.1 * closed_form);
}

TEST_CASE("baseline: synthetic ctr gets within 0.02 of the Bayes AUC", "[train][baseline]") {
  const Split split = loadOrFail("synthetic-ctr");
  TrainOptions o;
  o.model = "ctr";
  o.hidden = {64, 32};
  o.embedding_dim = 8;
  o.epochs = 3;
  o.batch_size = 512;
  o.optimizer = optimizer(kernels::OptimizerKind::kAdam, 0.001f);
  o.embedding_optimizer = optimizer(kernels::OptimizerKind::kAdagrad, 0.1f);
  o.embedding_init_scale = 0.01f;
  const TrainResult r = trainOrFail(split, o);
  const Dataset& test = split.test;
  const double bayes = rocAuc(test.true_probability.data(), test.labels.data(), test.rows);
  const double bayes_logloss = logLoss(test.true_probability.data(), test.labels.data(), test.rows);
  WARN("synthetic-ctr Bayes-optimal test auc " << bayes << " logloss " << bayes_logloss << "; trained auc "
                                               << r.test.auc << " (gap " << bayes - r.test.auc << "); "
                                               << r.embedding_rows << " embedding rows");
  CHECK(r.test.auc >= bayes - 0.02);
  CHECK(r.test.auc <= bayes + 0.005);
}

}  // namespace
}  // namespace zps::train
