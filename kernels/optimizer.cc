#include "kernels/optimizer.h"

#include <cmath>
#include <string>

namespace zps::kernels {
namespace {

constexpr const char* kValidNames = "sgd, momentum, adam, adagrad";

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool finite(float v) { return std::isfinite(v); }

}  // namespace

StatusOr<OptimizerKind> optimizerFromName(std::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "momentum") return OptimizerKind::kMomentum;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "adagrad") return OptimizerKind::kAdagrad;
  return InvalidArgument("unknown optimizer '" + std::string(name) + "' (valid: " + kValidNames + ")");
}

const char* optimizerName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kMomentum: return "momentum";
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdagrad: return "adagrad";
  }
  return "unknown";
}

Status validateOptimizerConfig(const OptimizerConfig& c) {
  if (!finite(c.lr) || c.lr <= 0) {
    return InvalidArgument("learning rate must be a positive number, got " + std::to_string(c.lr));
  }
  if (!finite(c.momentum) || c.momentum < 0 || c.momentum >= 1) {
    return InvalidArgument("momentum must be in [0, 1), got " + std::to_string(c.momentum));
  }
  if (!finite(c.beta1) || c.beta1 < 0 || c.beta1 >= 1 || !finite(c.beta2) || c.beta2 < 0 || c.beta2 >= 1) {
    return InvalidArgument("adam betas must be in [0, 1), got " + std::to_string(c.beta1) + " and " +
                           std::to_string(c.beta2));
  }
  if (!finite(c.eps) || c.eps <= 0) {
    return InvalidArgument("eps must be positive, got " + std::to_string(c.eps));
  }
  if (!finite(c.initial_accumulator) || c.initial_accumulator < 0) {
    return InvalidArgument("adagrad initial accumulator must be >= 0, got " + std::to_string(c.initial_accumulator));
  }
  return Status::OK();
}

size_t optimizerStateFloats(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd: return 0;
    case OptimizerKind::kMomentum: return 1;
    case OptimizerKind::kAdagrad: return 1;
    case OptimizerKind::kAdam: return 2;
  }
  return 0;
}

void initOptimizerState(const OptimizerConfig& config, float* state, size_t n) {
  const size_t total = optimizerStateFloats(config.kind) * n;
  const float value = config.kind == OptimizerKind::kAdagrad ? config.initial_accumulator : 0.0f;
  for (size_t i = 0; i < total; ++i) state[i] = value;
}

void applyOptimizerRows(const OptimizerConfig& config, uint32_t dim, size_t rows, const uint32_t* slots,
                        const uint64_t* steps, const float* grads, float* values, float* state) {
  const size_t state_floats = optimizerStateFloats(config.kind) * dim;
  for (size_t i = 0; i < rows; ++i) {
    applyOptimizer(config, values + size_t{slots[i]} * dim, state + size_t{slots[i]} * state_floats, grads + i * dim,
                   dim, steps[i]);
  }
}

void adamCorrections(const OptimizerConfig& config, uint64_t step, float* inv_bc1, float* inv_bc2) {
  const double t = static_cast<double>(step == 0 ? 1 : step);
  *inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(config.beta1), t)));
  *inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(config.beta2), t)));
}

void applyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                    uint64_t step) {
  const float lr = config.lr;
  switch (config.kind) {
    case OptimizerKind::kSgd:
      for (size_t i = 0; i < n; ++i) params[i] -= lr * grad[i];
      return;
    case OptimizerKind::kMomentum: {
      const float mu = config.momentum;
      float* v = state;
      for (size_t i = 0; i < n; ++i) {
        v[i] = mu * v[i] + grad[i];
        params[i] -= lr * v[i];
      }
      return;
    }
    case OptimizerKind::kAdagrad: {
      const float eps = config.eps;
      float* acc = state;
      for (size_t i = 0; i < n; ++i) {
        acc[i] += grad[i] * grad[i];
        params[i] -= lr * grad[i] / (std::sqrt(acc[i]) + eps);
      }
      return;
    }
    case OptimizerKind::kAdam: {
      const float b1 = config.beta1;
      const float b2 = config.beta2;
      const float eps = config.eps;
      // The corrections in double, once per call: beta^t underflows gracefully for any step, and
      // every element then uses the same two float factors (a CUDA kernel gets the same two
      // scalars).
      float inv_bc1 = 1, inv_bc2 = 1;
      adamCorrections(config, step, &inv_bc1, &inv_bc2);
      float* m = state;
      float* v = state + n;
      for (size_t i = 0; i < n; ++i) {
        const float g = grad[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        params[i] -= lr * (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps);
      }
      return;
    }
  }
}

void initEmbeddingRow(uint64_t key, uint64_t seed, float scale, float* row, size_t dim) {
  const uint64_t base = splitMix64(key ^ splitMix64(seed));
  for (size_t j = 0; j < dim; ++j) {
    // 24 random bits give a float in [0, 1) exactly.
    const uint64_t r = splitMix64(base + j);
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
    row[j] = (2.0f * u - 1.0f) * scale;
  }
}

}  // namespace zps::kernels
