// The operations the dense models of zps train need (train/model.cc), on memory of one
// backend: the CPU (host memory, OpenBLAS: train/cpu_train_ops.cc) or one GPU (device memory,
// cuBLAS and the kernels of kernels/cuda/train_ops.cu). A model written against TrainOps keeps its
// parameters, activations and gradients in the backend's memory for the whole run; only the batch
// input goes in (through staging memory, pinned for the GPU) and the loss scalar comes out.
//
// Errors are sticky, the way CUDA's own are: an op that fails records the first error (with the call,
// file and line) in status() and later ops do nothing. A training step checks status() once at its
// end, which keeps the per-op calls of the models free of Status plumbing. Plain C++: no CUDA headers.
//
// Owned by one training thread and called only from it.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/optimizer.h"
#include "zps/status.h"

namespace zps::kernels {

// The loss on top of the last layer (kernels/train_math.h has the formulas).
enum class LossHead { kSquared, kSoftmax, kLogistic };

class TrainOps {
 public:
  virtual ~TrainOps() = default;

  // "cpu (OpenBLAS)", "cuda (cuBLAS on GPU 0)"; for log lines.
  virtual std::string describe() const = 0;
  // The first error of any op so far (OK while none failed).
  virtual Status status() const = 0;

  // Backend memory (device memory on a GPU) and host staging memory (pinned on a GPU), in floats.
  // nullptr, with the error recorded, when the allocation fails; release(nullptr) does nothing.
  virtual float* allocate(size_t floats) = 0;
  virtual void release(float* p) = 0;
  virtual float* allocateStaging(size_t floats) = 0;
  virtual void releaseStaging(float* p) = 0;

  // Host -> backend. Asynchronous from staging memory: the caller leaves `host` unchanged until the
  // next op that waits (headLossGrad, download, synchronize); any host memory is accepted.
  virtual void upload(float* dst, const float* host, size_t n) = 0;
  // Backend -> host; waits for every op before it.
  virtual void download(float* host, const float* src, size_t n) = 0;
  // Waits for every op so far, e.g. before the worker API reads a gradient from backend memory.
  virtual void synchronize() = 0;

  // Row-major C = alpha * op(A) * op(B) + beta * C (train/blas.h's gemm) on backend memory.
  virtual void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
                    const float* b, size_t ldb, float beta, float* c, size_t ldc) = 0;
  // Each of the `rows` rows of out (row stride `width`) becomes a copy of `row`: a layer's biases
  // before the product adds the weights' part.
  virtual void fillRows(float* out, const float* row, size_t rows, size_t width) = 0;
  virtual void setZero(float* x, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  // x = max(x, 0); delta = 0 where act is not positive (ReLU's backward, act being its output).
  virtual void relu(float* x, size_t n) = 0;
  virtual void reluBackward(float* delta, const float* act, size_t n) = 0;
  // out[o] = sum over rows of x[row * width + o], rows in order (the bias gradients).
  virtual void columnSums(const float* x, size_t rows, size_t width, float* out) = 0;
  virtual void scale(float* x, size_t n, float factor) = 0;
  // out = a - b (out may be a or b).
  virtual void subtract(float* out, const float* a, const float* b, size_t n) = 0;
  // The head over `rows` rows of `width` logits: writes d(loss)/d(logits) into delta (same shape)
  // and returns the summed loss, added in row order in double. Labels are backend memory. Waits.
  virtual double headLossGrad(LossHead head, const float* logits, const float* labels, size_t rows, size_t width,
                              float* delta) = 0;
  // applyOptimizer (kernels/optimizer.h) on backend memory.
  virtual void applyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                              uint64_t step) = 0;
  // The index of the first NaN or infinity in x[0..n), or n when every value is finite: how a
  // training step notices divergence. Waits. This default downloads x; a backend may scan in place.
  virtual size_t firstNonFinite(const float* x, size_t n) {
    std::vector<float> host(n);
    download(host.data(), x, n);
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(host[i])) return i;
    return n;
  }
};

// A TrainOps buffer that only grows (contents are lost when it grows) and is released with its
// owner. Backend memory, or staging memory when made with kStaging.
class TrainBuffer {
 public:
  enum Kind { kBackend, kStaging };
  explicit TrainBuffer(TrainOps& ops, Kind kind = kBackend) : ops_(&ops), kind_(kind) {}
  ~TrainBuffer() { free(); }
  TrainBuffer(TrainBuffer&& o) noexcept
      : ops_(o.ops_), kind_(o.kind_), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  TrainBuffer& operator=(TrainBuffer&& o) noexcept {
    std::swap(ops_, o.ops_);
    std::swap(kind_, o.kind_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  TrainBuffer(const TrainBuffer&) = delete;
  TrainBuffer& operator=(const TrainBuffer&) = delete;

  // At least `floats` floats; returns data() (nullptr after a failed allocation, see status()).
  float* reserve(size_t floats) {
    if (floats <= size_ && data_ != nullptr) return data_;
    free();
    data_ =
        kind_ == kStaging ? ops_->allocateStaging(floats == 0 ? 1 : floats) : ops_->allocate(floats == 0 ? 1 : floats);
    size_ = data_ ? floats : 0;
    return data_;
  }
  float* data() const { return data_; }

 private:
  void free() {
    if (data_ == nullptr) return;
    if (kind_ == kStaging)
      ops_->releaseStaging(data_);
    else
      ops_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }

  TrainOps* ops_;
  Kind kind_;
  float* data_ = nullptr;
  size_t size_ = 0;
};

// The GPU backend on `device`: cuBLAS for products, kernels/cuda/train_ops.cu for the rest, all on
// one stream. kUnavailable without CUDA in the build, a device or cuBLAS (the message says which).
StatusOr<std::unique_ptr<TrainOps>> makeCudaTrainOps(int device);

}  // namespace zps::kernels
