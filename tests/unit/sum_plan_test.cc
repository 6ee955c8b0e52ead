// The CUDA sum kernel's launch plan (kernels/cuda/sum_plan.h), checked on the CPU: the kernel
// itself only runs on a GPU, but whether it touches every element exactly once, reads 16-byte
// packs only at aligned addresses and launches a legal grid is plain arithmetic.
#include "kernels/cuda/sum_plan.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

namespace zps::kernels::cuda {
namespace {

// Runs the kernel's index logic for `plan` and requires each of its elements visited exactly once,
// with every pack starting 16-byte aligned in both operands.
void requireExactCover(const SumPlan& plan, uintptr_t dst, uintptr_t src, size_t element_size) {
  std::vector<int> visits(plan.count, 0);
  for (size_t p = 0; p < plan.packs; ++p) {
    const size_t first = plan.head + p * plan.lanes;
    REQUIRE((dst + first * element_size) % kSumPackBytes == 0);
    REQUIRE((src + first * element_size) % kSumPackBytes == 0);
    for (size_t k = 0; k < plan.lanes; ++k) ++visits.at(first + k);
  }
  for (size_t j = 0; j < plan.singles(); ++j) ++visits.at(plan.single(j));
  size_t wrong = 0;
  for (int v : visits) wrong += v != 1;
  REQUIRE(wrong == 0);
}

TEST_CASE("the CUDA sum plan covers every element once at every alignment", "[sum_plan]") {
  const uintptr_t base = 0x7f0000001000;  // 4 KiB aligned, like an allocation
  for (const size_t size : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    for (size_t dst_off = 0; dst_off < kSumPackBytes; dst_off += size) {
      for (size_t src_off = 0; src_off < kSumPackBytes; src_off += size) {
        for (const size_t count : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{15}, size_t{16}, size_t{17},
                                   size_t{33}, size_t{1023}, size_t{4099}}) {
          CAPTURE(size, dst_off, src_off, count);
          const SumPlan plan = planSum(base + dst_off, base + 64 + src_off, count, size);
          CHECK(plan.lanes == kSumPackBytes / size);
          CHECK(plan.packs * plan.lanes + plan.singles() == count);
          if (dst_off != src_off) CHECK(plan.packs == 0);  // no pack can be aligned in both
          if (dst_off == src_off && count >= 2 * plan.lanes) CHECK(plan.packs > 0);
          requireExactCover(plan, base + dst_off, base + 64 + src_off, size);
          CHECK(plan.blocks >= 1);
        }
      }
    }
  }
}

TEST_CASE("the CUDA sum plan launches a legal grid for any length", "[sum_plan]") {
  // 0 elements: no blocks, and launchSum returns before launching (a 0-block launch is an error).
  CHECK(planSum(0, 0, 0, 4).blocks == 0);
  // Past 2^31 elements (index math in size_t) and past the block cap: the grid stays at the cap
  // and one thread per pack would not fit, so the kernel's loops stride.
  const size_t huge = (size_t{1} << 33) + 5;
  const SumPlan plan = planSum(0, 0, huge, 1);
  CHECK(plan.blocks == kSumMaxBlocks);
  CHECK(plan.packs == huge / 16);
  CHECK(plan.singles() == 5);
  CHECK(plan.single(4) == huge - 1);
  // One element: one block.
  CHECK(planSum(4, 8, 1, 4).blocks == 1);
  // Exactly one block's worth of work, then one more.
  CHECK(planSum(0, 0, kSumThreadsPerBlock * 4, 4).blocks == 1);
  CHECK(planSum(0, 0, kSumThreadsPerBlock * 4 + 1, 4).blocks == 2);
}

}  // namespace
}  // namespace zps::kernels::cuda
