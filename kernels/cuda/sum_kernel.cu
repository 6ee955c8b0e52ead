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

namespace zps::kernels::cuda {
namespace {

constexpr int kThreadsPerBlock = 256;
// A grid-stride loop needs only enough blocks to fill the GPU several times over; more only adds
// block scheduling. 4096 x 256 threads is ~8 waves on a 132-SM H200.
constexpr size_t kMaxBlocks = 4096;
constexpr size_t kPackBytes = 16;

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
  __device__ T operator()(T a, T b) const {
    return __float2half_rn(__half2float(a) + __half2float(b));
  }
};

struct AddBFloat16 {
  using T = __nv_bfloat16;
  __device__ T operator()(T a, T b) const {
    return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
  }
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
struct alignas(kPackBytes) Pack {
  static constexpr int kLanes = kPackBytes / sizeof(T);
  T lane[kLanes];
};

// Elements [0, head) and [head + packs * kLanes, count) are done one by one; the packs in between
// start at dst + head and src + head, which the launcher has checked are both 16-byte aligned.
template <typename Add>
__global__ void __launch_bounds__(kThreadsPerBlock)
    sumKernel(typename Add::T* __restrict__ dst, const typename Add::T* __restrict__ src,
              size_t count, size_t head, size_t packs) {
  using T = typename Add::T;
  using P = Pack<T>;
  const Add add{};
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;

  if (packs != 0) {
    P* dst_packs = reinterpret_cast<P*>(dst + head);
    const P* src_packs = reinterpret_cast<const P*>(src + head);
    for (size_t p = first; p < packs; p += stride) {
      P a = dst_packs[p];
      const P b = src_packs[p];
#pragma unroll
      for (int k = 0; k < P::kLanes; ++k) a.lane[k] = add(a.lane[k], b.lane[k]);
      dst_packs[p] = a;
    }
  }

  const size_t tail_start = head + packs * P::kLanes;
  const size_t singles = head + (count - tail_start);
  for (size_t j = first; j < singles; j += stride) {
    const size_t i = j < head ? j : tail_start + (j - head);
    dst[i] = add(dst[i], src[i]);
  }
}

template <typename Add>
cudaError_t launch(void* dst, const void* src, size_t count, cudaStream_t stream) {
  using T = typename Add::T;
  constexpr size_t kLanes = Pack<T>::kLanes;
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  // Packs need dst and src at the same offset within 16 bytes; peel the elements before the first
  // boundary. Otherwise (receive buffers at arbitrary offsets) everything goes element by element.
  size_t head = count;
  size_t packs = 0;
  if (d % kPackBytes == s % kPackBytes) {
    const size_t head_bytes = (kPackBytes - d % kPackBytes) % kPackBytes;
    head = head_bytes / sizeof(T) < count ? head_bytes / sizeof(T) : count;
    packs = (count - head) / kLanes;
  }
  const size_t work = packs + (count - packs * kLanes);
  size_t blocks = (work + kThreadsPerBlock - 1) / kThreadsPerBlock;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  sumKernel<Add><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), count, head, packs);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchSum(void* dst, const void* src, size_t count, DType dtype, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  switch (dtype) {
    case DType::kFloat32:
      return launch<AddFloat32>(dst, src, count, stream);
    case DType::kFloat16:
      return launch<AddFloat16>(dst, src, count, stream);
    case DType::kBFloat16:
      return launch<AddBFloat16>(dst, src, count, stream);
    case DType::kFloat64:
      return launch<AddFloat64>(dst, src, count, stream);
    case DType::kInt32:
      return launch<AddUInt32>(dst, src, count, stream);
    case DType::kInt64:
      return launch<AddUInt64>(dst, src, count, stream);
    case DType::kUInt8:
      return launch<AddUInt8>(dst, src, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t probeSumKernel() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, sumKernel<AddFloat32>);
}

}  // namespace zps::kernels::cuda
