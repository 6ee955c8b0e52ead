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

// One parameter's update per rule, shared by the flat kernels and the row-batch kernel.
__device__ inline void sgdStep(float& p, float g, float lr) { p = __fsub_rn(p, __fmul_rn(lr, g)); }

__device__ inline void momentumStep(float& p, float& v, float g, float lr, float mu) {
  const float vi = __fadd_rn(__fmul_rn(mu, v), g);
  v = vi;
  p = __fsub_rn(p, __fmul_rn(lr, vi));
}

__device__ inline void adagradStep(float& p, float& acc, float g, float lr, float eps) {
  const float a = __fadd_rn(acc, __fmul_rn(g, g));
  acc = a;
  p = __fsub_rn(p, __fdiv_rn(__fmul_rn(lr, g), __fadd_rn(__fsqrt_rn(a), eps)));
}

__device__ inline void adamStep(float& p, float& m, float& v, float g, float lr, float b1, float b2, float eps,
                                float inv_bc1, float inv_bc2) {
  const float mi = __fadd_rn(__fmul_rn(b1, m), __fmul_rn(__fsub_rn(1.0f, b1), g));
  // (1 - b2) * g * g associates left, as in the CPU loop.
  const float vi = __fadd_rn(__fmul_rn(b2, v), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, b2), g), g));
  m = mi;
  v = vi;
  const float num = __fmul_rn(lr, __fmul_rn(mi, inv_bc1));
  const float den = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, inv_bc2)), eps);
  p = __fsub_rn(p, __fdiv_rn(num, den));
}

#define ZPS_GRID_STRIDE(i, n) \
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < (n); i += size_t{gridDim.x} * blockDim.x)

__global__ void sgdKernel(float* __restrict__ p, const float* __restrict__ g, size_t n, float lr) {
  ZPS_GRID_STRIDE(i, n) sgdStep(p[i], g[i], lr);
}

__global__ void momentumKernel(float* __restrict__ p, float* __restrict__ v, const float* __restrict__ g, size_t n,
                               float lr, float mu) {
  ZPS_GRID_STRIDE(i, n) momentumStep(p[i], v[i], g[i], lr, mu);
}

__global__ void adagradKernel(float* __restrict__ p, float* __restrict__ acc, const float* __restrict__ g, size_t n,
                              float lr, float eps) {
  ZPS_GRID_STRIDE(i, n) adagradStep(p[i], acc[i], g[i], lr, eps);
}

__global__ void adamKernel(float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
                           const float* __restrict__ g, size_t n, float lr, float b1, float b2, float eps,
                           float inv_bc1, float inv_bc2) {
  ZPS_GRID_STRIDE(i, n) adamStep(p[i], m[i], v[i], g[i], lr, b1, b2, eps, inv_bc1, inv_bc2);
}

// Rows of `dim` parameters, each with its own state ([slot][dim] per row, rows one after the
// other) and, for Adam, its own bias corrections (rows have their own update counts).
__global__ void rowsKernel(OptimizerKind kind, float* __restrict__ p, float* __restrict__ state,
                           const float* __restrict__ g, size_t rows, size_t dim, size_t slots, float lr, float mu,
                           float b1, float b2, float eps, const float* __restrict__ inv_bc1,
                           const float* __restrict__ inv_bc2) {
  ZPS_GRID_STRIDE(i, rows * dim) {
    const size_t row = i / dim;
    float* s = state + row * slots * dim + (i - row * dim);
    switch (kind) {
      case OptimizerKind::kSgd: sgdStep(p[i], g[i], lr); break;
      case OptimizerKind::kMomentum: momentumStep(p[i], s[0], g[i], lr, mu); break;
      case OptimizerKind::kAdagrad: adagradStep(p[i], s[0], g[i], lr, eps); break;
      case OptimizerKind::kAdam: adamStep(p[i], s[0], s[dim], g[i], lr, b1, b2, eps, inv_bc1[row], inv_bc2[row]); break;
    }
  }
}

unsigned gridFor(size_t n) {
  size_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  return static_cast<unsigned>(blocks);
}

}  // namespace

Status cudaApplyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                          uint64_t step, void* stream_ptr) {
  if (n == 0) return Status::OK();
  if (optimizerStateFloats(config.kind) > 0 && state == nullptr) {
    return InvalidArgument(std::string("cudaApplyOptimizer: ") + optimizerName(config.kind) + " needs state");
  }
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  const unsigned grid = gridFor(n);
  switch (config.kind) {
    case OptimizerKind::kSgd: sgdKernel<<<grid, kThreads, 0, stream>>>(params, grad, n, config.lr); break;
    case OptimizerKind::kMomentum:
      momentumKernel<<<grid, kThreads, 0, stream>>>(params, state, grad, n, config.lr, config.momentum);
      break;
    case OptimizerKind::kAdagrad:
      adagradKernel<<<grid, kThreads, 0, stream>>>(params, state, grad, n, config.lr, config.eps);
      break;
    case OptimizerKind::kAdam: {
      float inv_bc1 = 1, inv_bc2 = 1;
      adamCorrections(config, step, &inv_bc1, &inv_bc2);  // exactly the CPU's factors
      adamKernel<<<grid, kThreads, 0, stream>>>(params, state, state + n, grad, n, config.lr, config.beta1,
                                                config.beta2, config.eps, inv_bc1, inv_bc2);
      break;
    }
    default: return InvalidArgument("cudaApplyOptimizer: unknown optimizer kind");
  }
  ZPS_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::OK();
}

}  // namespace zps::kernels

namespace zps::kernels {

Status cudaApplyOptimizerRows(const OptimizerConfig& config, float* params, float* state, const float* grad,
                              size_t rows, size_t dim, const float* inv_bc1, const float* inv_bc2, void* stream) {
  if (rows == 0 || dim == 0) return Status::OK();
  const size_t slots = optimizerStateFloats(config.kind);
  if (slots > 0 && state == nullptr) {
    return InvalidArgument(std::string("cudaApplyOptimizerRows: ") + optimizerName(config.kind) + " needs state");
  }
  if (config.kind == OptimizerKind::kAdam && (inv_bc1 == nullptr || inv_bc2 == nullptr))
    return InvalidArgument("cudaApplyOptimizerRows: adam needs per-row bias corrections");
  if (static_cast<unsigned>(config.kind) > static_cast<unsigned>(OptimizerKind::kAdagrad))
    return InvalidArgument("cudaApplyOptimizerRows: unknown optimizer kind");
  rowsKernel<<<gridFor(rows * dim), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      config.kind, params, state, grad, rows, dim, slots, config.lr, config.momentum, config.beta1, config.beta2,
      config.eps, inv_bc1, inv_bc2);
  ZPS_CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return Status::OK();
}

}  // namespace zps::kernels
