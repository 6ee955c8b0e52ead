// Optimizer kernels: the update rules that turn a gradient into new parameters. Workers apply them
// to their whole flat dense parameter vector (server sum mode); servers apply them to one embedding
// row, or one partition, at a time (server param mode). Plain C++ on host memory; CUDA twins come
// later and must match these rules.
//
// Functions here are stateless and thread-compatible: callers own the parameter and state buffers,
// and different threads may update disjoint buffers at the same time. Results are deterministic:
// the same inputs give bit-identical outputs, which is what keeps synchronous workers
// bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zps/status.h"

namespace zps::kernels {

enum class OptimizerKind { kSgd, kMomentum, kAdam, kAdagrad };

// The update rules, for one parameter p with gradient g (t = `step`, 1-based):
//   sgd:      p -= lr * g
//   momentum: v = momentum * v + g;  p -= lr * v        (PyTorch's form, no dampening)
//   adam:     m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2
//             p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   adagrad:  a += g^2;  p -= lr * g / (sqrt(a) + eps)  (a starts at initial_accumulator)
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  float lr = 0.01f;
  float momentum = 0.9f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  // Adagrad's starting accumulator (TensorFlow's default). A positive start keeps the first steps
  // from being lr * sign(g), which is too large for freshly initialised embedding rows.
  float initial_accumulator = 0.1f;
};

// "sgd", "momentum", "adam", "adagrad". An unknown name gives InvalidArgument listing the valid
// ones.
StatusOr<OptimizerKind> optimizerFromName(std::string_view name);
const char* optimizerName(OptimizerKind kind);

// Checks the hyper-parameters (lr > 0, momentum and betas in [0, 1), eps > 0, initial_accumulator
// >= 0, all finite). The apply functions assume a valid config; callers check once, when they parse
// flags.
Status validateOptimizerConfig(const OptimizerConfig& config);

// Floats of optimizer state per parameter: sgd 0, momentum 1, adagrad 1, adam 2.
size_t optimizerStateFloats(OptimizerKind kind);

// Sets the state of n parameters to its starting value: zeros, or adagrad's initial_accumulator.
// `state` holds optimizerStateFloats(kind) * n floats laid out [slot][n] (adam: all m, then all v).
void initOptimizerState(const OptimizerConfig& config, float* state, size_t n);

// params[i] -= update(grad[i]) for i in [0, n), updating `state` (layout as above). `step` is the
// 1-based count of updates these parameters have received, this one included; only Adam reads it
// (bias correction). A server keeps one count per embedding row, a worker one for its dense vector.
void applyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                    uint64_t step);

// applyOptimizer for `rows` rows of a table: row i is slot slots[i] (values + slot * dim, state +
// slot * optimizerStateFloats * dim), with gradient grads + i * dim and update count steps[i].
void applyOptimizerRows(const OptimizerConfig& config, uint32_t dim, size_t rows, const uint32_t* slots,
                        const uint64_t* steps, const float* grads, float* values, float* state);

// Adam's bias corrections for update `step` (0 counts as 1): 1 / (1 - beta^t), computed in double and
// rounded to float once, so the CPU loop and the CUDA kernels multiply by the same two factors.
void adamCorrections(const OptimizerConfig& config, uint64_t step, float* inv_bc1, float* inv_bc2);

// The deterministic initialiser of embedding rows, shared by the servers (which create a row on its
// first touch) and single-process training (train/embedding.h), so both start from the same
// table: row[j] is uniform in [-scale, scale), a pure function of (key, seed, j).
void initEmbeddingRow(uint64_t key, uint64_t seed, float scale, float* row, size_t dim);

}  // namespace zps::kernels
