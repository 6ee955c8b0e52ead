#include "train/cpu_train_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/train_math.h"
#include "train/blas.h"

namespace zps::train {
namespace {

namespace math = kernels::train_math;

class CpuTrainOps final : public kernels::TrainOps {
 public:
  std::string describe() const override { return "cpu (OpenBLAS)"; }
  Status status() const override { return Status::OK(); }

  float* allocate(size_t floats) override { return new float[floats](); }
  void release(float* p) override { delete[] p; }
  float* allocateStaging(size_t floats) override { return allocate(floats); }
  void releaseStaging(float* p) override { release(p); }

  void upload(float* dst, const float* host, size_t n) override { copy(dst, host, n); }
  void download(float* host, const float* src, size_t n) override { copy(host, src, n); }
  void synchronize() override {}
  size_t firstNonFinite(const float* x, size_t n) override {
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i])) return i;
    return n;
  }

  void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
            const float* b, size_t ldb, float beta, float* c, size_t ldc) override {
    train::gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  void fillRows(float* out, const float* row, size_t rows, size_t width) override {
    for (size_t i = 0; i < rows; ++i) std::memcpy(out + i * width, row, width * sizeof(float));
  }
  void setZero(float* x, size_t n) override { std::fill(x, x + n, 0.0f); }
  void copy(float* dst, const float* src, size_t n) override {
    if (n > 0 && dst != src) std::memmove(dst, src, n * sizeof(float));
  }
  void relu(float* x, size_t n) override {
    for (size_t i = 0; i < n; ++i) x[i] = math::relu(x[i]);
  }
  void reluBackward(float* delta, const float* act, size_t n) override {
    for (size_t i = 0; i < n; ++i) delta[i] = math::reluBackward(delta[i], act[i]);
  }
  void columnSums(const float* x, size_t rows, size_t width, float* out) override {
    std::fill(out, out + width, 0.0f);
    for (size_t i = 0; i < rows; ++i) {
      const float* r = x + i * width;
      for (size_t o = 0; o < width; ++o) out[o] += r[o];
    }
  }
  void scale(float* x, size_t n, float factor) override {
    for (size_t i = 0; i < n; ++i) x[i] *= factor;
  }
  void subtract(float* out, const float* a, const float* b, size_t n) override {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] - b[i];
  }
  double headLossGrad(kernels::LossHead head, const float* logits, const float* labels, size_t rows, size_t width,
                      float* delta) override {
    double loss = 0;
    for (size_t i = 0; i < rows; ++i)
      loss += math::headLoss(head, logits + i * width, width, labels[i], delta + i * width);
    return loss;
  }
  void applyOptimizer(const kernels::OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                      uint64_t step) override {
    kernels::applyOptimizer(config, params, state, grad, n, step);
  }
};

}  // namespace

kernels::TrainOps& cpuTrainOps() {
  static CpuTrainOps ops;
  return ops;
}

}  // namespace zps::train
