// The CPU backend of kernels/train_ops.h against the math the models used before they ran on
// TrainOps, written out here as plain reference loops: products, sums and ReLU exactly, heads to
// double rounding, the optimizer bit for bit. tests/cuda/train_ops_test.cc compares the CUDA backend
// with this one on the same scenario (tests/common/train_ops_scenario.h).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "tests/common/train_ops_scenario.h"
#include "train/cpu_train_ops.h"

namespace zps::testing {
namespace {

using S = ScenarioShape;
using Values = std::vector<double>;

Values asValues(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

std::map<std::string, Values> reference() {
  std::map<std::string, Values> ref;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const size_t salt = static_cast<size_t>(ta * 2 + tb);
      const std::vector<float> a = exactValues(S::m * S::k, salt), b = exactValues(S::k * S::n, salt + 5);
      std::vector<float> c = exactValues(S::m * S::n, salt + 9);
      for (size_t i = 0; i < S::m; ++i) {
        for (size_t j = 0; j < S::n; ++j) {
          float dot = 0;
          for (size_t p = 0; p < S::k; ++p)
            dot += (ta ? a[p * S::m + i] : a[i * S::k + p]) * (tb ? b[j * S::k + p] : b[p * S::n + j]);
          c[i * S::n + j] += 2.0f * dot;
        }
      }
      ref["gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb)] = asValues(c);
    }
  }
  const std::vector<float> row = exactValues(S::n, 3), x = exactValues(S::m * S::n, 4);
  Values filled, relu, back, sums(S::n, 0.0), scaled, diff;
  const std::vector<float> delta = exactValues(x.size(), 6);
  for (size_t i = 0; i < x.size(); ++i) {
    filled.push_back(row[i % S::n]);
    relu.push_back(x[i] > 0 ? x[i] : 0.0f);
    back.push_back(x[i] > 0 ? delta[i] : 0.0f);
    sums[i % S::n] += x[i];
    scaled.push_back(x[i] * 0.5);
    diff.push_back(x[i] - x[i] * 0.5);
  }
  ref["fillRows"] = filled;
  ref["relu"] = relu;
  ref["reluBackward"] = back;
  ref["columnSums"] = sums;
  ref["scale"] = scaled;
  ref["subtract"] = diff;
  ref["copy"] = scaled;
  ref["setZero"] = Values(x.size(), 0.0);

  // Heads from their textbook forms: softmax probabilities, the sigmoid, the squared error.
  std::vector<float> z = exactValues(S::rows * S::classes, 8);
  for (float& v : z) v *= 0.5f;
  double softmax_loss = 0, logistic_loss = 0, squared_loss = 0;
  Values softmax_grad, logistic_grad, squared_grad;
  for (size_t i = 0; i < S::rows; ++i) {
    double total = 0;
    for (size_t k = 0; k < S::classes; ++k) total += std::exp(double{z[i * S::classes + k]});
    for (size_t k = 0; k < S::classes; ++k) {
      const double p = std::exp(double{z[i * S::classes + k]}) / total;
      softmax_grad.push_back(p - (k == i % S::classes ? 1.0 : 0.0));
      if (k == i % S::classes) softmax_loss -= std::log(p);
    }
    const double v = z[i], t = static_cast<double>(i % 2), s = 1.0 / (1.0 + std::exp(-v));
    logistic_loss -= t * std::log(s) + (1 - t) * std::log(1 - s);
    logistic_grad.push_back(s - t);
    squared_loss += (v - t) * (v - t);
    squared_grad.push_back(2 * (v - t));
  }
  ref["softmax loss"] = {softmax_loss};
  ref["softmax grad"] = softmax_grad;
  ref["logistic loss"] = {logistic_loss};
  ref["logistic grad"] = logistic_grad;
  ref["squared loss"] = {squared_loss};
  ref["squared grad"] = squared_grad;

  kernels::OptimizerConfig adam;
  adam.kind = kernels::OptimizerKind::kAdam;
  adam.lr = 0.125f;
  std::vector<float> params = exactValues(S::params, 10), state(2 * S::params, 0.0f);
  const std::vector<float> grad = exactValues(S::params, 11);
  for (uint64_t step = 1; step <= 3; ++step)
    kernels::applyOptimizer(adam, params.data(), state.data(), grad.data(), S::params, step);
  ref["adam params"] = asValues(params);
  return ref;
}

TEST_CASE("train ops: the CPU backend computes what the models computed before TrainOps", "[train][ops]") {
  kernels::TrainOps& ops = train::cpuTrainOps();
  const auto results = runTrainOpsScenario(ops);
  REQUIRE(ops.status().ok());
  const auto ref = reference();
  REQUIRE(results.size() == ref.size());
  for (const auto& [name, got] : results) {
    INFO(name);
    REQUIRE(ref.count(name) == 1);
    const Values& want = ref.at(name);
    REQUIRE(got.size() == want.size());
    // Heads go through exp and log (the reference in another order): float rounding of the
    // gradients, double rounding of the losses. Everything else is exact.
    const bool head = name.find("loss") != std::string::npos || name.find("grad") != std::string::npos;
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      if (head)
        CHECK(got[i] == Approx(want[i]).margin(1e-6).epsilon(1e-6));
      else
        CHECK(got[i] == want[i]);
    }
  }
}

TEST_CASE("train ops: buffers grow, keep the backend, and release on destruction", "[train][ops]") {
  kernels::TrainOps& ops = train::cpuTrainOps();
  kernels::TrainBuffer staging(ops, kernels::TrainBuffer::kStaging), backend(ops);
  REQUIRE(staging.reserve(4) != nullptr);
  float* first = backend.reserve(8);
  REQUIRE(first != nullptr);
  CHECK(backend.reserve(5) == first);  // big enough: reused, not reallocated
  for (int i = 0; i < 4; ++i) staging.data()[i] = static_cast<float>(i) + 0.25f;
  ops.upload(backend.data(), staging.data(), 4);
  std::vector<float> back(4);
  ops.download(back.data(), backend.data(), 4);
  CHECK(back == std::vector<float>{0.25f, 1.25f, 2.25f, 3.25f});
  CHECK(backend.reserve(1000) != nullptr);
  CHECK(ops.status().ok());
}

}  // namespace
}  // namespace zps::testing
