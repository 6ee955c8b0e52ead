// The NCCL local reducer's plan (which pieces become one reduce-scatter / all-gather and which a
// single reduce / broadcast) and its entry points without a GPU. The NCCL calls themselves run only
// on a GPU machine (tools/gpu-check.sh); the plan is pure and checked here.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "kernels/cuda_reducer.h"
#include "kernels/local_collectives.h"
#include "tests/local_pieces.h"

namespace zps::kernels {
namespace {

// Every byte of the tensor is covered by exactly one step, and single steps keep their owner.
void checkCovers(const std::vector<LocalPiece>& pieces, int n, size_t bytes) {
  std::vector<int> covered(bytes, 0);
  for (const auto& step : planLocalCollectives(pieces, n)) {
    const size_t span = step.whole_partition ? step.piece_bytes * n : step.piece_bytes;
    for (size_t b = step.offset; b < step.offset + span; ++b) covered.at(b)++;
    if (!step.whole_partition) {
      bool found = false;
      for (const auto& p : pieces) found |= p.offset == step.offset && p.owner == step.owner;
      CHECK(found);
    }
  }
  for (size_t b = 0; b < bytes; ++b) REQUIRE(covered[b] == 1);
}

TEST_CASE("local collectives: whole partitions become one reduce-scatter, the tail single pieces") {
  // 2 ranks, pieces of 100 bytes, 350 bytes: one whole partition, then a 100-byte and a 50-byte piece.
  auto steps = planLocalCollectives(cut(350, 100, 2), 2);
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].whole_partition);
  CHECK(steps[0].offset == 0);
  CHECK(steps[0].piece_bytes == 100);
  CHECK_FALSE(steps[1].whole_partition);
  CHECK(steps[1].offset == 200);
  CHECK(steps[1].owner == 0);
  CHECK_FALSE(steps[2].whole_partition);
  CHECK(steps[2].offset == 300);
  CHECK(steps[2].piece_bytes == 50);
  CHECK(steps[2].owner == 1);

  // An exact multiple: only whole partitions.
  steps = planLocalCollectives(cut(1200, 100, 4), 4);
  REQUIRE(steps.size() == 3);
  for (const auto& s : steps) CHECK(s.whole_partition);

  // A tensor smaller than one partition: single pieces only.
  steps = planLocalCollectives(cut(150, 100, 3), 3);
  REQUIRE(steps.size() == 2);
  CHECK_FALSE(steps[0].whole_partition);
  CHECK(steps[1].owner == 1);
}

TEST_CASE("local collectives: every plan covers each byte once") {
  for (int n : {1, 2, 3, 4, 8}) {
    for (size_t bytes : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{4099}}) {
      for (size_t piece : {size_t{1}, size_t{4}, size_t{100}, size_t{4096}}) {
        INFO("n=" << n << " bytes=" << bytes << " piece=" << piece);
        checkCovers(cut(bytes, piece, n), n, bytes);
      }
    }
  }
  CHECK(planLocalCollectives({}, 2).empty());
}

TEST_CASE("local collectives: without a usable GPU the NCCL reducer says why") {
  std::string why;
  if (cudaDeviceAvailable(&why)) {
    SUCCEED("a CUDA device is usable here; tools/gpu-check.sh covers the NCCL reducer");
    return;
  }
  int host = 0;
  CHECK_FALSE(isDevicePointer(&host));
  CHECK_FALSE(isDevicePointer(nullptr));
  auto made = makeNcclLocalReducer("", 0, 1, 0, std::chrono::seconds(5), nullptr);
  REQUIRE_FALSE(made.ok());
  INFO(made.status().toString());
  CHECK_FALSE(made.status().message().empty());
  // A rank outside the group: kInvalidArgument with NCCL built, kUnavailable from the stub.
  CHECK_FALSE(makeNcclLocalReducer("", 2, 2, 0, std::chrono::seconds(5), nullptr).ok());
}

}  // namespace
}  // namespace zps::kernels
