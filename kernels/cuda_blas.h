// Dense matrix products on the GPU with cuBLAS, for `zps train --device cuda`. Plain C++: no
// CUDA headers. Without CUDA in the build, makeCublasGemm returns kUnavailable with the reason.
#pragma once

#include <cstddef>
#include <memory>

#include "zps/status.h"

namespace zps::kernels {

// Row-major C = alpha * op(A) * op(B) + beta * C on host pointers, computed on one GPU: operands
// are copied into device buffers that grow as needed and are reused across calls (one model's
// products have a handful of shapes, so after the first step nothing is allocated). Owned by one
// thread.
class GpuGemm {
 public:
  virtual ~GpuGemm() = default;
  virtual Status gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha,
                      const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
                      size_t ldc) = 0;
};

StatusOr<std::unique_ptr<GpuGemm>> makeCublasGemm(int device);

}  // namespace zps::kernels
