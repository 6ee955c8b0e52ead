// The one door to OpenBLAS for zps_train. It pins OpenBLAS to one thread before the first product,
// because a multi-threaded sgemm may split its reductions differently from run to run, and
// synchronous workers must compute bit-identical gradients from identical inputs. Data parallelism
// across workers is where zps gets its speed, not threads inside one product.
//
// Thread-safe: any thread may call these, each on its own buffers.
#pragma once

#include <cstddef>

namespace zps::train {

// Row-major C = alpha * op(A) * op(B) + beta * C, with op(A) m x k and op(B) k x n. lda, ldb and
// ldc are the row strides of A, B and C as stored. A thin wrapper of cblas_sgemm.
void gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
          const float* b, size_t ldb, float beta, float* c, size_t ldc);

// Sets OpenBLAS to one thread (once per process; gemm calls it too). Callers that use OpenBLAS
// outside gemm call it first.
void pinBlasToOneThread();

}  // namespace zps::train
