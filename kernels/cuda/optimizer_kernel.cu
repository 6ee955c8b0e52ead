// The optimizer update kernels (see kernels/cuda_optimizer.h). One grid-stride kernel per rule; the
// explicit __f*_rn intrinsics keep nvcc from contracting a * b + c into an FMA, which would round
// differently from the CPU loop in kernels/optimizer.cc.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda_optimizer.h"

namespace zps::kernels {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

__global__ void sgdKernel(float* __restrict__ p, const float* __restrict__ g, size_t n, float lr) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, g[i]));
  }
}

__global__ void momentumKernel(float* __restrict__ p, float* __restrict__ v,
                               const float* __restrict__ g, size_t n, float lr, float mu) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float vi = __fadd_rn(__fmul_rn(mu, v[i]), g[i]);
    v[i] = vi;
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, vi));
  }
}

__global__ void adagradKernel(float* __restrict__ p, float* __restrict__ acc,
                              const float* __restrict__ g, size_t n, float lr, float eps) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float gi = g[i];
    const float a = __fadd_rn(acc[i], __fmul_rn(gi, gi));
    acc[i] = a;
    p[i] = __fsub_rn(p[i], __fdiv_rn(__fmul_rn(lr, gi), __fadd_rn(__fsqrt_rn(a), eps)));
  }
}

__global__ void adamKernel(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                           const float* __restrict__ g, size_t n, float lr, float b1, float b2,
                           float eps, float inv_bc1, float inv_bc2) {
  const float one_minus_b1 = __fsub_rn(1.0f, b1);
  const float one_minus_b2 = __fsub_rn(1.0f, b2);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_minus_b1, gi));
    // (1 - b2) * g * g associates left, as in the CPU loop.
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_minus_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float num = __fmul_rn(lr, __fmul_rn(mi, inv_bc1));
    const float den = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, inv_bc2)), eps);
    p[i] = __fsub_rn(p[i], __fdiv_rn(num, den));
  }
}

}  // namespace

Status cudaApplyOptimizer(const OptimizerConfig& config, float* params, float* state,
                          const float* grad, size_t n, uint64_t step, void* stream_ptr) {
  if (n == 0) return Status::OK();
  if (optimizerStateFloats(config.kind) > 0 && state == nullptr) {
    return InvalidArgument(std::string("cudaApplyOptimizer: ") + optimizerName(config.kind) +
                           " needs state");
  }
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  const unsigned grid = static_cast<unsigned>(blocks);
  switch (config.kind) {
    case OptimizerKind::kSgd:
      sgdKernel<<<grid, kThreads, 0, stream>>>(params, grad, n, config.lr);
      break;
    case OptimizerKind::kMomentum:
      momentumKernel<<<grid, kThreads, 0, stream>>>(params, state, grad, n, config.lr,
                                                    config.momentum);
      break;
    case OptimizerKind::kAdagrad:
      adagradKernel<<<grid, kThreads, 0, stream>>>(params, state, grad, n, config.lr, config.eps);
      break;
    case OptimizerKind::kAdam: {
      // Exactly the CPU's corrections: in double, once per call, then rounded to float.
      const double t = static_cast<double>(step == 0 ? 1 : step);
      const float inv_bc1 =
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(config.beta1), t)));
      const float inv_bc2 =
          static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(config.beta2), t)));
      adamKernel<<<grid, kThreads, 0, stream>>>(params, state, state + n, grad, n, config.lr,
                                                config.beta1, config.beta2, config.eps, inv_bc1,
                                                inv_bc2);
      break;
    }
    default:
      return InvalidArgument("cudaApplyOptimizer: unknown optimizer kind");
  }
  ZPS_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::OK();
}

}  // namespace zps::kernels
