// How the CUDA sum kernel (sum_kernel.cu) splits dst[i] += src[i] into 16-byte packs and single
// elements, and how many blocks it launches. Plain C++ (nvcc also compiles it for the device), so
// that tests/unit/sum_plan_test.cc checks on any machine what only a GPU would otherwise show:
// every element summed exactly once, packs only at 16-byte aligned addresses of both operands, and
// a launchable grid.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define ZPS_SUM_PLAN_HOST_DEVICE __host__ __device__
#else
#define ZPS_SUM_PLAN_HOST_DEVICE
#endif

namespace zps::kernels::cuda {

constexpr size_t kSumPackBytes = 16;
constexpr unsigned kSumThreadsPerBlock = 256;
// A grid-stride loop needs only enough blocks to fill the GPU several times over; more only adds
// block scheduling. 4096 x 256 threads is ~8 waves on a 132-SM H200 (and far below gridDim.x's limit).
constexpr size_t kSumMaxBlocks = 4096;

struct SumPlan {
  size_t count = 0;
  size_t lanes = 1;     // elements per 16-byte pack
  size_t head = 0;      // elements [0, head) come one by one, before the first pack
  size_t packs = 0;     // packs cover elements [head, head + packs * lanes)
  unsigned blocks = 0;  // 0 only when count is 0: such a launch is an error, so none is made

  // Elements done one by one: the head, then the tail after the packs.
  ZPS_SUM_PLAN_HOST_DEVICE size_t singles() const { return count - packs * lanes; }
  // The element of the j-th single, j < singles().
  ZPS_SUM_PLAN_HOST_DEVICE size_t single(size_t j) const { return j < head ? j : head + packs * lanes + (j - head); }
};

// The plan for `count` elements of `element_size` bytes at addresses dst and src, both aligned to
// the element size. Packs need dst and src at the same offset within 16 bytes (the elements before
// the first boundary are peeled); otherwise, as for receive buffers at arbitrary offsets, every
// element goes one by one.
inline SumPlan planSum(uintptr_t dst, uintptr_t src, size_t count, size_t element_size) {
  SumPlan plan;
  plan.count = count;
  plan.lanes = kSumPackBytes / element_size;
  plan.head = count;
  if (dst % kSumPackBytes == src % kSumPackBytes) {
    const size_t head_bytes = (kSumPackBytes - dst % kSumPackBytes) % kSumPackBytes;
    plan.head = head_bytes / element_size < count ? head_bytes / element_size : count;
    plan.packs = (count - plan.head) / plan.lanes;
  }
  // One thread per pack or single element, up to the cap; the kernel's loops stride over the rest.
  const size_t work = plan.packs + plan.singles();
  size_t blocks = (work + kSumThreadsPerBlock - 1) / kSumThreadsPerBlock;
  if (blocks > kSumMaxBlocks) blocks = kSumMaxBlocks;
  plan.blocks = static_cast<unsigned>(blocks);
  return plan;
}

}  // namespace zps::kernels::cuda
