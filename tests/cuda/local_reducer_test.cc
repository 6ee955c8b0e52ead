// The NCCL local reducer (kernels/local_collectives.h) on real devices: one local rank (no NCCL:
// device -> pinned staging -> device), and two local ranks when the machine has two GPUs (NCCL
// refuses two ranks on one GPU). Exact-arithmetic int32 data, so the sums must match exactly.
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda_reducer.h"
#include "kernels/local_collectives.h"
#include "tests/local_pieces.h"

namespace zps::kernels {
namespace {

// Rank r's input: element i is i * (r + 1); the servers "add" 1000 to every element.
std::vector<int32_t> input(size_t n, int rank) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i) * (rank + 1);
  return v;
}

// Runs one push-pull of `n` int32 through `reducer` as local rank `rank` of `size`, with the
// tensor in device memory, and returns what the rank ends with. No Catch assertions inside: the
// two-rank test runs it on two threads, and Catch's assertions are not thread-safe.
StatusOr<std::vector<int32_t>> roundTrip(DeviceLocalReducer& reducer, int device, size_t n, int rank, int size) {
  auto cuda = [](cudaError_t e, const char* what) {
    return e == cudaSuccess ? Status::OK() : InternalError(std::string(what) + ": " + cudaGetErrorString(e));
  };
  ZPS_RETURN_IF_ERROR(cuda(cudaSetDevice(device), "cudaSetDevice"));
  const size_t bytes = n * sizeof(int32_t);
  const std::vector<LocalPiece> pieces = cut(bytes, 4096 * 3 + 8, size);  // ragged tail included
  const std::vector<int32_t> host = input(n, rank);
  void* in = nullptr;
  void* out = nullptr;
  ZPS_RETURN_IF_ERROR(cuda(cudaMalloc(&in, bytes), "cudaMalloc"));
  ZPS_RETURN_IF_ERROR(cuda(cudaMalloc(&out, bytes), "cudaMalloc"));
  ZPS_RETURN_IF_ERROR(cuda(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy"));
  ZPS_ASSIGN_OR_RETURN(uint8_t * staging, reducer.staging(0, bytes));
  ZPS_RETURN_IF_ERROR(reducer.reduceScatter(in, bytes, DType::kInt32, pieces, staging));
  // The "servers": add 1000 to the owned pieces only.
  for (const auto& p : pieces) {
    if (p.owner != rank) continue;
    auto* v = reinterpret_cast<int32_t*>(staging + p.offset);
    for (size_t i = 0; i < p.bytes / sizeof(int32_t); ++i) v[i] += 1000;
  }
  ZPS_RETURN_IF_ERROR(reducer.allGather(staging, bytes, DType::kInt32, pieces, out));
  std::vector<int32_t> got(n);
  ZPS_RETURN_IF_ERROR(cuda(cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy"));
  cudaFree(in);
  cudaFree(out);
  return got;
}

void checkSums(StatusOr<std::vector<int32_t>> result, int size) {
  INFO(result.status().toString());
  REQUIRE(result.ok());
  const std::vector<int32_t>& got = *result;
  const int32_t factor = size * (size + 1) / 2;  // sum over ranks of (r + 1)
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != static_cast<int32_t>(i) * factor + 1000;
  CHECK(wrong == 0);
}

TEST_CASE("NCCL local reducer with one local rank: device tensor through pinned staging", "[cuda]") {
  auto made = makeNcclLocalReducer("", 0, 1, 0, std::chrono::seconds(60), nullptr);
  INFO(made.status().toString());
  REQUIRE(made.ok());
  for (size_t n : {size_t{1}, size_t{4099}, size_t{1} << 20}) checkSums(roundTrip(**made, 0, n, 0, 1), 1);
}

TEST_CASE("NCCL local reducer with one local rank: host output, zero length", "[cuda]") {
  auto made = makeNcclLocalReducer("", 0, 1, 0, std::chrono::seconds(60), nullptr);
  INFO(made.status().toString());
  REQUIRE(made.ok());
  DeviceLocalReducer& reducer = **made;
  // A device input made with cudaMemcpy from pageable memory (which may return before the bytes
  // land) and a pageable host output: the reducer orders itself after the default stream.
  const size_t n = (size_t{1} << 20) + 5, bytes = n * sizeof(int32_t);
  const std::vector<int32_t> host = input(n, 0);
  void* in = nullptr;
  REQUIRE(cudaMalloc(&in, bytes) == cudaSuccess);
  REQUIRE(cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
  const std::vector<LocalPiece> pieces = cut(bytes, 4096 * 3 + 8, 1);
  auto staging = reducer.staging(1, bytes);
  REQUIRE(staging.ok());
  REQUIRE(reducer.reduceScatter(in, bytes, DType::kInt32, pieces, *staging).ok());
  std::vector<int32_t> out(n, -1);
  REQUIRE(reducer.allGather(*staging, bytes, DType::kInt32, pieces, out.data()).ok());
  CHECK(out == host);
  cudaFree(in);
  auto empty = reducer.staging(2, 0);
  REQUIRE(empty.ok());
  CHECK(reducer.reduceScatter(nullptr, 0, DType::kFloat32, {}, *empty).ok());
  CHECK(reducer.allGather(*empty, 0, DType::kFloat32, {}, nullptr).ok());
}

TEST_CASE("NCCL local reducer with two local ranks on two GPUs", "[cuda]") {
  if (cudaDeviceCount() < 2) {
    WARN("SKIP: one GPU here, and NCCL refuses two ranks on one device; tools/gpu-check.sh says so too");
    return;
  }
  auto id = ncclNewUniqueId();
  REQUIRE(id.ok());
  std::vector<StatusOr<std::vector<int32_t>>> results(2, StatusOr<std::vector<int32_t>>(InternalError("not run")));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      auto made = makeNcclLocalReducer(*id, rank, 2, rank, std::chrono::seconds(60), nullptr);
      if (!made.ok()) {
        results[rank] = made.status();
        return;
      }
      results[rank] = roundTrip(**made, rank, (size_t{1} << 20) + 5, rank, 2);
    });
  }
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    checkSums(results[rank], 2);
  }
}

}  // namespace
}  // namespace zps::kernels
