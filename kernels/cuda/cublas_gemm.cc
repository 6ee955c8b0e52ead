// cuBLAS behind kernels/cuda_blas.h. cuBLAS is column-major; a row-major C = op(A) op(B) is the
// column-major C^T = op(B)^T op(A)^T, so the operands are passed swapped and nothing is transposed
// in memory.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gpu_libraries.h"
#include "kernels/cuda_blas.h"

namespace zps::kernels {
namespace {

// cuBLAS as loaded by makeCublasGemm, the only way into this file: everything below runs after the
// load succeeded.
const cuda::CublasLibrary& cublas() { return *cuda::cublasLibrary().value(); }

Status cublasToStatus(cublasStatus_t status, const char* what, const char* file, int line) {
  return InternalError(std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                       cublas().cublasGetStatusName(status) + ": " + cublas().cublasGetStatusString(status));
}

#define ZPS_CUBLAS_RETURN_IF_ERROR(call)                                    \
  do {                                                                      \
    const cublasStatus_t zps_cublas_status_ = (call);                       \
    if (zps_cublas_status_ != CUBLAS_STATUS_SUCCESS)                        \
      return cublasToStatus(zps_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

class CublasGemm final : public GpuGemm {
 public:
  CublasGemm(int device, cublasHandle_t handle, cuda::Stream stream)
      : device_(device), handle_(handle), stream_(std::move(stream)) {}
  ~CublasGemm() override {
    static_cast<void>(cudaSetDevice(device_));
    cublas().cublasDestroy(handle_);
  }

  Status gemm(bool trans_a, bool trans_b, size_t m, size_t n, size_t k, float alpha, const float* a, size_t lda,
              const float* b, size_t ldb, float beta, float* c, size_t ldc) override {
    if (m == 0 || n == 0) return Status::OK();
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ZPS_CUBLAS_RETURN_IF_ERROR(
        cublas().cublasSgemm(handle_, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                             static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                             static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc)));
    return Status::OK();
  }

  void* stream() const override { return stream_.get(); }

 private:
  const int device_;
  cublasHandle_t handle_;
  cuda::Stream stream_;
};

}  // namespace

StatusOr<std::unique_ptr<GpuGemm>> makeCublasGemm(int device) {
  ZPS_RETURN_IF_ERROR(cuda::cublasLibrary().status());
  ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  cuda::Stream stream;
  ZPS_RETURN_IF_ERROR(stream.create());
  cublasHandle_t handle = nullptr;
  ZPS_CUBLAS_RETURN_IF_ERROR(cublas().cublasCreate(&handle));
  // Deterministic products: no tensor-core TF32 shortcuts, so workers that see the same inputs
  // compute the same gradients (the synchronous-training promise of zps train).
  if (const cublasStatus_t st = cublas().cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH); st != CUBLAS_STATUS_SUCCESS) {
    cublas().cublasDestroy(handle);
    return cublasToStatus(st, "cublasSetMathMode", __FILE__, __LINE__);
  }
  if (const cublasStatus_t st = cublas().cublasSetStream(handle, stream.get()); st != CUBLAS_STATUS_SUCCESS) {
    cublas().cublasDestroy(handle);
    return cublasToStatus(st, "cublasSetStream", __FILE__, __LINE__);
  }
  return std::unique_ptr<GpuGemm>(std::make_unique<CublasGemm>(device, handle, std::move(stream)));
}

}  // namespace zps::kernels
