// Dense matrix products on the GPU with cuBLAS, for `zps train --device cuda`. Plain C++: no
// CUDA headers. Without CUDA in the build, makeCublasGemm returns kUnavailable with the reason.
#pragma once

#include <cstddef>
#include <memory>

#include "zps/status.h"

namespace zps::kernels {

// Row-major C = alpha * op(A) * op(B) + beta * C on device memory of one GPU, on one stream: the
// products of zps train --device cuda (kernels/train_ops.h). Owned by one thread.
class GpuGemm {
 public:
  virtual ~GpuGemm() = default;
  // Device pointers of this GpuGemm's device; enqueued on stream() without waiting.
  virtual Status gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
                      const float* b, size_t ldb, float beta, float* c, size_t ldc) = 0;
  // The stream the products run on (a cudaStream_t), for work that must run in order with them.
  virtual void* stream() const = 0;
};

StatusOr<std::unique_ptr<GpuGemm>> makeCublasGemm(int device);

}  // namespace zps::kernels
