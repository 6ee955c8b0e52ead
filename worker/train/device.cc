#include "worker/train/device.h"

#include <glog/logging.h>

#include <memory>

#include "kernels/cuda_blas.h"
#include "kernels/cuda_reducer.h"
#include "worker/train/blas.h"

namespace zps::train {

StatusOr<std::string> useTrainDevice(const std::string& device, int local_rank) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return InvalidArgument("--device='" + device + "' is not a device; use cpu, cuda or auto");
  }
  if (device == "cpu") {
    setGemmBackend(nullptr);
    return std::string("cpu (OpenBLAS)");
  }
  std::string why;
  if (!kernels::cudaDeviceAvailable(&why)) {
    if (device == "cuda")
      return Unavailable("--device=cuda but " + why + "; use --device=cpu or auto");
    setGemmBackend(nullptr);
    return "cpu (OpenBLAS): --device=auto found no GPU: " + why;
  }
  const int count = kernels::cudaDeviceCount();
  const int gpu = count > 0 ? local_rank % count : 0;
  ZPS_ASSIGN_OR_RETURN(std::unique_ptr<kernels::GpuGemm> made, kernels::makeCublasGemm(gpu));
  std::shared_ptr<kernels::GpuGemm> gemm = std::move(made);
  setGemmBackend([gemm](bool ta, bool tb, size_t m, size_t n, size_t k, float alpha, const float* a,
                        size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
    const Status s = gemm->gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    // A failed product cannot be reported through gemm(); training on garbage would be worse.
    LOG_IF(FATAL, !s.ok()) << "cuBLAS gemm: " << s.toString();
  });
  return "cuda (cuBLAS on GPU " + std::to_string(gpu) + ")";
}

}  // namespace zps::train
