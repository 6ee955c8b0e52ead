// Tests for the optimizer kernels (kernels/optimizer.h): each rule against values worked out by
// hand for a few steps, state layout and initialisation, config checks, and the embedding row
// initialiser.
#include "kernels/optimizer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace zps::kernels {
namespace {

OptimizerConfig config(OptimizerKind kind, float lr) {
  OptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  return c;
}

// Runs one parameter through the given gradients and returns its value after each step.
std::vector<float> trajectory(const OptimizerConfig& c, float start, const std::vector<float>& grads) {
  float p = start;
  std::vector<float> state(optimizerStateFloats(c.kind));
  initOptimizerState(c, state.data(), 1);
  std::vector<float> out;
  uint64_t step = 0;
  for (float g : grads) {
    applyOptimizer(c, &p, state.data(), &g, 1, ++step);
    out.push_back(p);
  }
  return out;
}

TEST_CASE("sgd: p -= lr * g", "[kernels][optimizer]") {
  const auto t = trajectory(config(OptimizerKind::kSgd, 0.1f), 1.0f, {0.5f, -1.0f, 2.0f});
  CHECK(t[0] == Approx(0.95).epsilon(1e-6));
  CHECK(t[1] == Approx(1.05).epsilon(1e-6));
  CHECK(t[2] == Approx(0.85).epsilon(1e-6));
}

TEST_CASE("momentum: v = mu v + g, p -= lr v", "[kernels][optimizer]") {
  // v: 1, 1.9, 1.71; p: 1 - 0.1, 0.9 - 0.19, 0.71 - 0.171.
  const auto t = trajectory(config(OptimizerKind::kMomentum, 0.1f), 1.0f, {1.0f, 1.0f, 0.0f});
  CHECK(t[0] == Approx(0.9).epsilon(1e-6));
  CHECK(t[1] == Approx(0.71).epsilon(1e-6));
  CHECK(t[2] == Approx(0.539).epsilon(1e-6));
}

TEST_CASE("adam: bias-corrected moments", "[kernels][optimizer]") {
  // Steps 1 and 2 with g = 1: the corrected moments are exactly 1 and 1, so each step moves by lr.
  // Step 3 with g = -1: m = 0.071, v = 0.002997001, m_hat = 0.071 / 0.271, v_hat = 1.
  const auto t = trajectory(config(OptimizerKind::kAdam, 0.1f), 1.0f, {1.0f, 1.0f, -1.0f});
  CHECK(t[0] == Approx(0.900000001).epsilon(1e-6));
  CHECK(t[1] == Approx(0.800000002).epsilon(1e-6));
  CHECK(t[2] == Approx(0.7738007402693734).epsilon(1e-6));

  // Adam is invariant to the gradient's scale: g = 0.001 moves as far as g = 1 on the first step.
  const auto small = trajectory(config(OptimizerKind::kAdam, 0.1f), 1.0f, {0.001f});
  CHECK(small[0] == Approx(0.9).epsilon(1e-5));
}

TEST_CASE("adagrad: accumulated squares from the initial accumulator", "[kernels][optimizer]") {
  // a: 0.1 + 1 = 1.1, + 4 = 5.1, + 1 = 6.1; p -= 0.1 g / sqrt(a).
  const auto t = trajectory(config(OptimizerKind::kAdagrad, 0.1f), 1.0f, {1.0f, 2.0f, -1.0f});
  CHECK(t[0] == Approx(0.9046537419845316).epsilon(1e-6));
  CHECK(t[1] == Approx(0.8160922538226789).epsilon(1e-6));
  CHECK(t[2] == Approx(0.8565810701676903).epsilon(1e-6));
}

TEST_CASE("state is laid out [slot][n] and elements are independent", "[kernels][optimizer]") {
  OptimizerConfig c = config(OptimizerKind::kAdam, 0.01f);
  const size_t n = 3;
  std::vector<float> params{1, 2, 3}, state(2 * n, -1.0f), grad{0.5f, -0.25f, 0.0f};
  initOptimizerState(c, state.data(), n);
  for (float s : state) CHECK(s == 0.0f);
  applyOptimizer(c, params.data(), state.data(), grad.data(), n, 1);
  // m in the first n floats, v in the next n.
  CHECK(state[0] == Approx(0.05));
  CHECK(state[1] == Approx(-0.025));
  CHECK(state[3] == Approx(0.00025).epsilon(1e-4));  // (1 - 0.999f) is 1.3e-5 off in float
  CHECK(state[4] == Approx(0.0000625).epsilon(1e-4));
  CHECK(params[2] == 3.0f);  // zero gradient, zero moments: no move

  // Whole-vector and one-element-at-a-time updates agree bit for bit (servers update row by row).
  std::vector<float> p1{0.3f, -0.7f}, p2 = p1, s1(4), s2(4), g{0.2f, 0.9f};
  initOptimizerState(c, s1.data(), 2);
  applyOptimizer(c, p1.data(), s1.data(), g.data(), 2, 1);
  for (size_t i = 0; i < 2; ++i) {
    float m_v[2] = {0, 0};
    applyOptimizer(c, &p2[i], m_v, &g[i], 1, 1);
  }
  CHECK(p1 == p2);

  OptimizerConfig ada = config(OptimizerKind::kAdagrad, 0.1f);
  ada.initial_accumulator = 0.25f;
  std::vector<float> acc(4);
  initOptimizerState(ada, acc.data(), 4);
  for (float a : acc) CHECK(a == 0.25f);
}

TEST_CASE("optimizer names, state sizes and config checks", "[kernels][optimizer]") {
  CHECK(optimizerFromName("sgd").value() == OptimizerKind::kSgd);
  CHECK(optimizerFromName("momentum").value() == OptimizerKind::kMomentum);
  CHECK(optimizerFromName("adam").value() == OptimizerKind::kAdam);
  CHECK(optimizerFromName("adagrad").value() == OptimizerKind::kAdagrad);
  auto bad = optimizerFromName("rmsprop");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("'rmsprop'"));
  CHECK_THAT(bad.status().message(), Catch::Contains("sgd, momentum, adam, adagrad"));
  for (auto k : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam, OptimizerKind::kAdagrad}) {
    CHECK(optimizerFromName(optimizerName(k)).value() == k);
  }

  CHECK(optimizerStateFloats(OptimizerKind::kSgd) == 0);
  CHECK(optimizerStateFloats(OptimizerKind::kMomentum) == 1);
  CHECK(optimizerStateFloats(OptimizerKind::kAdagrad) == 1);
  CHECK(optimizerStateFloats(OptimizerKind::kAdam) == 2);

  CHECK(validateOptimizerConfig(config(OptimizerKind::kAdam, 0.001f)).ok());
  CHECK_FALSE(validateOptimizerConfig(config(OptimizerKind::kSgd, 0.0f)).ok());
  CHECK_FALSE(validateOptimizerConfig(config(OptimizerKind::kSgd, -1.0f)).ok());
  CHECK_FALSE(validateOptimizerConfig(config(OptimizerKind::kSgd, NAN)).ok());
  OptimizerConfig c = config(OptimizerKind::kMomentum, 0.1f);
  c.momentum = 1.0f;
  CHECK_FALSE(validateOptimizerConfig(c).ok());
  c = config(OptimizerKind::kAdam, 0.1f);
  c.beta2 = 1.5f;
  CHECK_FALSE(validateOptimizerConfig(c).ok());
  c = config(OptimizerKind::kAdam, 0.1f);
  c.eps = 0;
  CHECK_FALSE(validateOptimizerConfig(c).ok());
}

TEST_CASE("embedding rows start deterministic, small and different", "[kernels][optimizer]") {
  std::vector<float> a(16), b(16), c(16), d(16);
  initEmbeddingRow(42, 1, 0.01f, a.data(), a.size());
  initEmbeddingRow(42, 1, 0.01f, b.data(), b.size());
  initEmbeddingRow(43, 1, 0.01f, c.data(), c.size());
  initEmbeddingRow(42, 2, 0.01f, d.data(), d.size());
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  double sum = 0;
  for (float v : a) {
    CHECK(v >= -0.01f);
    CHECK(v < 0.01f);
    sum += std::fabs(v);
  }
  CHECK(sum > 0);
  // A row's prefix does not depend on the row length.
  std::vector<float> shorter(4);
  initEmbeddingRow(42, 1, 0.01f, shorter.data(), shorter.size());
  CHECK(std::equal(shorter.begin(), shorter.end(), a.begin()));
}

}  // namespace
}  // namespace zps::kernels
