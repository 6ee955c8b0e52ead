// The CUDA sum kernel: dst[i] += src[i] for every zps dtype, one template instantiation per dtype
// (seven in all, to keep nvcc time down on small CI machines).
//
// Each thread walks a grid-stride loop over 16-byte packs when dst and src can both be read that
// way, then over the leftover elements one at a time. Arithmetic matches cpu_reducer.cc exactly:
// 16-bit floats are summed in float32 and rounded to nearest even once, integers wrap.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/sum_kernel.h"
#include "kernels/cuda/sum_plan.h"

namespace zps::kernels::cuda {
namespace {

struct AddFloat32 {
  using T = float;
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct AddFloat64 {
  using T = double;
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct AddFloat16 {
  using T = __half;
  __device__ T operator()(T a, T b) const { return __float2half_rn(__half2float(a) + __half2float(b)); }
};

struct AddBFloat16 {
  using T = __nv_bfloat16;
  __device__ T operator()(T a, T b) const { return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b)); }
};

// Integers are added as unsigned so that overflow wraps (two's complement) by definition.
struct AddUInt32 {
  using T = uint32_t;
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct AddUInt64 {
  using T = unsigned long long;
  __device__ T operator()(T a, T b) const { return a + b; }
};

struct AddUInt8 {
  using T = uint8_t;
  __device__ T operator()(T a, T b) const { return static_cast<T>(a + b); }
};

template <typename T>
struct alignas(kSumPackBytes) Pack {
  static constexpr int kLanes = kSumPackBytes / sizeof(T);
  T lane[kLanes];
};

// The plan (sum_plan.h) gives the packs, which start at dst + head and src + head, both 16-byte
// aligned, and the elements done one by one before and after them.
template <typename Add>
__global__ void __launch_bounds__(kSumThreadsPerBlock)
    sumKernel(typename Add::T* __restrict__ dst, const typename Add::T* __restrict__ src, SumPlan plan) {
  using T = typename Add::T;
  using P = Pack<T>;
  const Add add{};
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

  if (plan.packs != 0) {
    P* dst_packs = reinterpret_cast<P*>(dst + plan.head);
    const P* src_packs = reinterpret_cast<const P*>(src + plan.head);
    for (size_t p = first; p < plan.packs; p += stride) {
      P a = dst_packs[p];
      const P b = src_packs[p];
#pragma unroll
      for (int k = 0; k < P::kLanes; ++k) a.lane[k] = add(a.lane[k], b.lane[k]);
      dst_packs[p] = a;
    }
  }

  const size_t singles = plan.singles();
  for (size_t j = first; j < singles; j += stride) {
    const size_t i = plan.single(j);
    dst[i] = add(dst[i], src[i]);
  }
}

template <typename Add>
cudaError_t launch(void* dst, const void* src, size_t count, cudaStream_t stream) {
  using T = typename Add::T;
  const SumPlan plan = planSum(reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), count, sizeof(T));
  sumKernel<Add>
      <<<plan.blocks, kSumThreadsPerBlock, 0, stream>>>(static_cast<T*>(dst), static_cast<const T*>(src), plan);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchSum(void* dst, const void* src, size_t count, DType dtype, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;  // a launch of 0 blocks would fail (invalid configuration)
  switch (dtype) {
    case DType::kFloat32: return launch<AddFloat32>(dst, src, count, stream);
    case DType::kFloat16: return launch<AddFloat16>(dst, src, count, stream);
    case DType::kBFloat16: return launch<AddBFloat16>(dst, src, count, stream);
    case DType::kFloat64: return launch<AddFloat64>(dst, src, count, stream);
    case DType::kInt32: return launch<AddUInt32>(dst, src, count, stream);
    case DType::kInt64: return launch<AddUInt64>(dst, src, count, stream);
    case DType::kUInt8: return launch<AddUInt8>(dst, src, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t probeSumKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, sumKernel<AddFloat32>);
}

}  // namespace zps::kernels::cuda
