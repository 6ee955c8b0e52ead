// One fixed run of every kernels::TrainOps op on small data, shared by the unit test (CPU backend
// against reference formulas written out in the test) and the cuda test (CUDA backend against the
// CPU backend). Inputs are small integers and halves, so products, sums and ReLU are exact in float
// on any backend; only the heads' exp/log and Adam's sqrt/divide may differ by rounding.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "kernels/train_ops.h"

namespace zps::testing {

// Small integer values in [-3, 3], deterministic from (i, salt).
inline float exactValue(size_t i, size_t salt) {
  return static_cast<float>(static_cast<int>((i * 7 + salt * 13) % 7) - 3);
}

inline std::vector<float> exactValues(size_t n, size_t salt) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = exactValue(i, salt);
  return v;
}

// Shapes of the scenario: gemm C (m x n) = op(A) (m x k) op(B) (k x n); head rows x classes.
struct ScenarioShape {
  static constexpr size_t m = 5, n = 7, k = 3, rows = 6, classes = 4, params = 10;
};

// Runs the ops on `ops` and returns each result by name, on the host (losses as one value).
inline std::vector<std::pair<std::string, std::vector<double>>> runTrainOpsScenario(kernels::TrainOps& ops) {
  using S = ScenarioShape;
  std::vector<std::pair<std::string, std::vector<double>>> out;
  auto take = [&](const std::string& name, const float* p, size_t n) {
    std::vector<float> host(n);
    ops.download(host.data(), p, n);
    out.emplace_back(name, std::vector<double>(host.begin(), host.end()));
  };
  std::vector<float*> owned;
  // Backend copies of host vectors (the scenario's temporaries: each upload is waited for).
  auto device = [&](const std::vector<float>& host) {
    float* p = ops.allocate(host.size());
    owned.push_back(p);
    ops.upload(p, host.data(), host.size());
    ops.synchronize();
    return p;
  };

  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const size_t salt = static_cast<size_t>(ta * 2 + tb);
      float* a = device(exactValues(S::m * S::k, salt));
      float* b = device(exactValues(S::k * S::n, salt + 5));
      float* c = device(exactValues(S::m * S::n, salt + 9));
      ops.gemm(ta, tb, S::m, S::n, S::k, 2.0f, a, ta ? S::m : S::k, b, tb ? S::k : S::n, 1.0f, c, S::n);
      take("gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb), c, S::m * S::n);
    }
  }
  const std::vector<float> row = exactValues(S::n, 3);
  float* filled = device(std::vector<float>(S::m * S::n, 9.0f));
  ops.fillRows(filled, device(row), S::m, S::n);
  take("fillRows", filled, S::m * S::n);

  const std::vector<float> x = exactValues(S::m * S::n, 4);
  float* r = device(x);
  ops.relu(r, x.size());
  take("relu", r, x.size());
  float* delta = device(exactValues(x.size(), 6));
  ops.reluBackward(delta, r, x.size());
  take("reluBackward", delta, x.size());
  float* sums = device(std::vector<float>(S::n, 5.0f));
  ops.columnSums(device(x), S::m, S::n, sums);
  take("columnSums", sums, S::n);
  float* scaled = device(x);
  ops.scale(scaled, x.size(), 0.5f);
  take("scale", scaled, x.size());
  float* diff = device(std::vector<float>(x.size()));
  ops.subtract(diff, device(x), scaled, x.size());
  take("subtract", diff, x.size());
  ops.copy(diff, scaled, x.size());
  take("copy", diff, x.size());
  ops.setZero(diff, x.size());
  take("setZero", diff, x.size());

  // Heads: logits are halves in [-1.5, 1.5]; labels are classes (softmax) or 0/1.
  std::vector<float> logits = exactValues(S::rows * S::classes, 8);
  for (float& z : logits) z *= 0.5f;
  std::vector<float> classes(S::rows), binary(S::rows);
  for (size_t i = 0; i < S::rows; ++i) {
    classes[i] = static_cast<float>(i % S::classes);
    binary[i] = static_cast<float>(i % 2);
  }
  const struct {
    const char* name;
    kernels::LossHead head;
    size_t width;
    const std::vector<float>& labels;
  } heads[] = {{"softmax", kernels::LossHead::kSoftmax, S::classes, classes},
               {"logistic", kernels::LossHead::kLogistic, 1, binary},
               {"squared", kernels::LossHead::kSquared, 1, binary}};
  for (const auto& h : heads) {
    float* g = device(std::vector<float>(S::rows * h.width));
    const double loss = ops.headLossGrad(h.head, device(logits), device(h.labels), S::rows, h.width, g);
    out.emplace_back(std::string(h.name) + " loss", std::vector<double>{loss});
    take(std::string(h.name) + " grad", g, S::rows * h.width);
  }

  kernels::OptimizerConfig adam;
  adam.kind = kernels::OptimizerKind::kAdam;
  adam.lr = 0.125f;
  float* params = device(exactValues(S::params, 10));
  float* state = device(std::vector<float>(2 * S::params, 0.0f));
  float* grad = device(exactValues(S::params, 11));
  for (uint64_t step = 1; step <= 3; ++step) ops.applyOptimizer(adam, params, state, grad, S::params, step);
  take("adam params", params, S::params);

  for (float* p : owned) ops.release(p);
  return out;
}

}  // namespace zps::testing
