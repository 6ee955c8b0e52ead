// The CUDA entry points of a build without CUDA: every one reports why, so callers (the server's
// engine selection, tests/cuda) can fall back or skip with a message instead of failing to link.
#include <string>

#include "kernels/cuda/cuda_sum.h"
#include "kernels/cuda_blas.h"
#include "kernels/cuda_optimizer.h"
#include "kernels/cuda_reducer.h"
#include "kernels/gpu_report.h"
#include "kernels/local_collectives.h"
#include "kernels/train_ops.h"

namespace zps::kernels {
namespace {

constexpr const char* kNoCuda = "this zps build has no CUDA (configure with nvcc present or -DZPS_WITH_CUDA=ON)";

}  // namespace

bool cudaDeviceAvailable(std::string* why, int /*device*/) {
  if (why != nullptr) *why = kNoCuda;
  return false;
}

int cudaDeviceCount() { return 0; }

GpuReport gpuReport() { return GpuReport{std::string("build: ") + kNoCuda + "\n", false}; }

bool isDevicePointer(const void* /*p*/) { return false; }

StatusOr<void*> deviceAlloc(int /*device*/, size_t /*bytes*/) { return Unavailable(kNoCuda); }

void deviceFree(void* /*p*/) {}

Status copyBytes(void* /*dst*/, const void* /*src*/, size_t /*bytes*/) { return Unavailable(kNoCuda); }

StatusOr<std::unique_ptr<Reducer>> makeCudaReducer(int /*device*/) { return Unavailable(kNoCuda); }

Status cudaSumDevice(void* /*dst*/, const void* /*src*/, size_t /*count*/, DType /*dtype*/, void* /*stream*/) {
  return Unavailable(kNoCuda);
}

StatusOr<std::unique_ptr<GpuGemm>> makeCublasGemm(int /*device*/) { return Unavailable(kNoCuda); }

StatusOr<std::unique_ptr<TrainOps>> makeCudaTrainOps(int /*device*/) { return Unavailable(kNoCuda); }

Status cudaApplyOptimizer(const OptimizerConfig& /*config*/, float* /*params*/, float* /*state*/, const float* /*grad*/,
                          size_t /*n*/, uint64_t /*step*/, void* /*stream*/) {
  return Unavailable(kNoCuda);
}

Status cudaApplyOptimizerRows(const OptimizerConfig& /*config*/, float* /*params*/, float* /*state*/,
                              const float* /*grad*/, size_t /*rows*/, size_t /*dim*/, const float* /*inv_bc1*/,
                              const float* /*inv_bc2*/, void* /*stream*/) {
  return Unavailable(kNoCuda);
}

}  // namespace zps::kernels
