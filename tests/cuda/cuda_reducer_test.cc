// CUDA reducer and cudaSumDevice against the CPU reducer. The CPU reducer is checked on its own in
// tests/unit/reducer_test.cc, so here the two must agree bit for bit: on exact-arithmetic data for
// every dtype, and on arbitrary finite floats, where both round the same correctly rounded sum.
#include "kernels/cuda_reducer.h"

#include <cuda_runtime_api.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_sum.h"
#include "kernels/local_collectives.h"
#include "kernels/reducer.h"

namespace zps::kernels {
namespace {

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                DType::kInt32,   DType::kInt64,   DType::kUInt8};

using Bytes = std::vector<unsigned char>;

// Element i of a dtype array holds the small integer v (exact in every float type; uint8 wraps).
void putInt(DType dtype, unsigned char* p, int64_t v) {
  switch (dtype) {
    case DType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::kFloat16: {
      const uint16_t h = floatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::kBFloat16: {
      const uint16_t b = floatToBfloat16(static_cast<float>(v));
      std::memcpy(p, &b, 2);
      break;
    }
    case DType::kFloat64: {
      const double d = static_cast<double>(v);
      std::memcpy(p, &d, 8);
      break;
    }
    case DType::kInt32: {
      const auto x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::kInt64: std::memcpy(p, &v, 8); break;
    case DType::kUInt8: *p = static_cast<uint8_t>(v); break;
  }
}

// count elements of small integers (|v| <= 120, so every pairwise sum is exact even in bfloat16),
// with int32/int64/uint8 also getting values near their limits so that sums wrap.
Bytes exactData(DType dtype, size_t count, uint32_t seed) {
  const size_t size = dtypeSize(dtype);
  Bytes out(count * size);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    int64_t v = static_cast<int64_t>(rng() % 241) - 120;
    if (i % 17 == 0) {
      if (dtype == DType::kInt32) v = v < 0 ? INT32_MIN + 5 : INT32_MAX - 5;
      if (dtype == DType::kInt64) v = v < 0 ? INT64_MIN + 5 : INT64_MAX - 5;
    }
    if (dtype == DType::kUInt8) v = rng() % 256;
    putInt(dtype, out.data() + i * size, v);
  }
  return out;
}

// Random finite bit patterns for the float types (NaN payloads may legitimately differ).
Bytes finiteFloatData(DType dtype, size_t count, uint32_t seed) {
  const size_t size = dtypeSize(dtype);
  Bytes out(count * size);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    unsigned char* p = out.data() + i * size;
    switch (dtype) {
      case DType::kFloat16: {
        auto h = static_cast<uint16_t>(r);
        if ((h & 0x7c00u) == 0x7c00u) h &= 0xbfffu;  // clear an exponent bit: no inf/NaN
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        auto b = static_cast<uint16_t>(r);
        if ((b & 0x7f80u) == 0x7f80u) b &= 0xbfffu;
        std::memcpy(p, &b, 2);
        break;
      }
      case DType::kFloat32: {
        auto x = static_cast<uint32_t>(r);
        if ((x & 0x7f800000u) == 0x7f800000u) x &= 0xbfffffffu;
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kFloat64: {
        uint64_t x = r;
        if ((x & 0x7ff0000000000000u) == 0x7ff0000000000000u) x &= 0xbfffffffffffffffu;
        std::memcpy(p, &x, 8);
        break;
      }
      default: FAIL("not a float dtype");
    }
  }
  return out;
}

// Compares element by element; two NaNs count as equal (payload canonicalisation differs).
void requireSameElements(DType dtype, const Bytes& got, const Bytes& want) {
  REQUIRE(got.size() == want.size());
  const size_t size = dtypeSize(dtype);
  size_t mismatches = 0;
  for (size_t i = 0; i * size < got.size(); ++i) {
    const unsigned char* g = got.data() + i * size;
    const unsigned char* w = want.data() + i * size;
    if (std::memcmp(g, w, size) == 0) continue;
    if (dtype == DType::kFloat16) {
      uint16_t a, b;
      std::memcpy(&a, g, 2);
      std::memcpy(&b, w, 2);
      if (std::isnan(halfToFloat(a)) && std::isnan(halfToFloat(b))) continue;
    }
    if (dtype == DType::kBFloat16) {
      uint16_t a, b;
      std::memcpy(&a, g, 2);
      std::memcpy(&b, w, 2);
      if (std::isnan(bfloat16ToFloat(a)) && std::isnan(bfloat16ToFloat(b))) continue;
    }
    if (mismatches++ < 3) {
      uint64_t gb = 0, wb = 0;
      std::memcpy(&gb, g, size);
      std::memcpy(&wb, w, size);
      FAIL_CHECK(dtypeName(dtype) << " element " << i << ": cuda bits 0x" << std::hex << gb << ", cpu bits 0x" << wb);
    }
  }
  REQUIRE(mismatches == 0);
}

Reducer& cudaReducer() {
  static std::unique_ptr<Reducer> reducer = [] {
    auto made = makeCudaReducer(0);
    if (!made.ok()) FAIL("makeCudaReducer(0): " << made.status().toString());
    return std::move(made).value();
  }();
  return *reducer;
}

// Runs dst += src through the CUDA reducer with src placed at byte offset src_offset, and through
// the CPU reducer, and requires identical bytes.
void compareHostSum(DType dtype, const Bytes& dst, const Bytes& src, size_t src_offset) {
  const size_t count = dst.size() / dtypeSize(dtype);
  CAPTURE(dtypeName(dtype), count, src_offset);
  Bytes shifted(src.size() + src_offset);
  std::memcpy(shifted.data() + src_offset, src.data(), src.size());
  Bytes cpu = dst;
  cpuSum(cpu.data(), src.data(), count, dtype);
  Bytes gpu = dst;
  const Status status = cudaReducer().sum(gpu.data(), shifted.data() + src_offset, count, dtype);
  REQUIRE(status.ok());
  requireSameElements(dtype, gpu, cpu);
}

TEST_CASE("CUDA reducer matches the CPU reducer on exact data", "[cuda]") {
  CHECK(std::string(cudaReducer().name()) == "cuda");
  uint32_t seed = 1;
  for (const DType dtype : kAllDTypes) {
    for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{4099}, (size_t{1} << 20) + 3}) {
      const Bytes dst = exactData(dtype, count, seed++);
      const Bytes src = exactData(dtype, count, seed++);
      for (size_t offset = 0; offset < 8; ++offset) compareHostSum(dtype, dst, src, offset);
    }
  }
}

TEST_CASE("CUDA reducer stages tensors larger than its device buffers", "[cuda]") {
  // The reducer stages at most 64 MiB per operand, so these take two chunks.
  for (const auto& [dtype, count] :
       {std::pair{DType::kUInt8, (size_t{64} << 20) + 5}, std::pair{DType::kFloat32, (size_t{16} << 20) + 3}}) {
    compareHostSum(dtype, exactData(dtype, count, 7), exactData(dtype, count, 8), 3);
  }
}

TEST_CASE("CUDA and CPU round float sums identically", "[cuda]") {
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const size_t count = 100003;
    compareHostSum(dtype, finiteFloatData(dtype, count, 11), finiteFloatData(dtype, count, 12), 0);
  }
}

TEST_CASE("CUDA reducer rejects a dtype outside the enum", "[cuda]") {
  float dst = 1, src = 2;
  const Status status = cudaReducer().sum(&dst, &src, 1, static_cast<DType>(42));
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(dst == 1);
}

TEST_CASE("makeCudaReducer rejects devices that do not exist", "[cuda]") {
  for (const int device : {-1, 1 << 20}) {
    auto made = makeCudaReducer(device);
    REQUIRE_FALSE(made.ok());
    CHECK(made.status().code() == StatusCode::kInvalidArgument);
    INFO(made.status().toString());
  }
}

TEST_CASE("cudaDeviceAvailable probes the device it is asked about", "[cuda]") {
  std::string why;
  CHECK(cudaDeviceAvailable(&why, 0));
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == 0);  // the probed device becomes the thread's current one
  CHECK_FALSE(cudaDeviceAvailable(&why, 1 << 20));
  CHECK(why.find("requested") != std::string::npos);
}

TEST_CASE("CUDA rounds (start/add/collect) match the CPU, with several keys in flight", "[cuda]") {
  // Three keys per dtype, pushes interleaved across keys (so their streams overlap), four pushes
  // each, from unaligned sources; then every key is collected and compared with the CPU's sums.
  // Two passes: the second reuses pooled device sums.
  uint32_t seed = 500;
  for (int pass = 0; pass < 2; ++pass) {
    for (const DType dtype : kAllDTypes) {
      const size_t size = dtypeSize(dtype);
      const std::vector<size_t> counts = {1, 4099, (size_t{1} << 20) + 3};
      std::vector<Bytes> gpu(counts.size()), cpu(counts.size());
      for (int push = 0; push < 4; ++push) {
        for (size_t k = 0; k < counts.size(); ++k) {
          CAPTURE(pass, dtypeName(dtype), k, push);
          const Bytes src = exactData(dtype, counts[k], seed++);
          Bytes shifted(src.size() + 3);
          std::memcpy(shifted.data() + 3, src.data(), src.size());
          if (push == 0) {
            gpu[k].assign(counts[k] * size, 0);
            cpu[k] = src;
            REQUIRE(cudaReducer().start(gpu[k].data(), shifted.data() + 3, counts[k], dtype).ok());
          } else {
            cpuSum(cpu[k].data(), src.data(), counts[k], dtype);
            REQUIRE(cudaReducer().add(gpu[k].data(), shifted.data() + 3, counts[k], dtype).ok());
          }
          // The source may be reused at once: scribble on it.
          std::memset(shifted.data(), 0x5A, shifted.size());
        }
      }
      for (size_t k = 0; k < counts.size(); ++k) {
        REQUIRE(cudaReducer().collect(gpu[k].data()).ok());
        requireSameElements(dtype, gpu[k], cpu[k]);
      }
    }
  }
  float never_started = 0;
  CHECK(cudaReducer().collect(&never_started).code() == StatusCode::kInternal);
  CHECK(cudaReducer().add(&never_started, &never_started, 1, DType::kFloat32).code() == StatusCode::kInternal);
}

TEST_CASE("CUDA rounds of zero-length keys start, add and collect", "[cuda]") {
  // Zero-length keys have no buffers at all: nothing may be copied from or to a null pointer.
  float never_read = 0;
  REQUIRE(cudaReducer().start(&never_read, nullptr, 0, DType::kFloat32).ok());
  REQUIRE(cudaReducer().add(&never_read, nullptr, 0, DType::kFloat32).ok());
  REQUIRE(cudaReducer().collect(&never_read).ok());
  CHECK(never_read == 0);
}

TEST_CASE("A CUDA round started twice sums only the second start's pushes", "[cuda]") {
  // The store restarts a round whose first start failed; the old round's stream must be done.
  const size_t count = 4099;
  std::vector<float> sum(count), a(count, 1.0f), b(count, 2.0f);
  REQUIRE(cudaReducer().start(sum.data(), a.data(), count, DType::kFloat32).ok());
  REQUIRE(cudaReducer().add(sum.data(), a.data(), count, DType::kFloat32).ok());
  REQUIRE(cudaReducer().start(sum.data(), b.data(), count, DType::kFloat32).ok());
  REQUIRE(cudaReducer().add(sum.data(), b.data(), count, DType::kFloat32).ok());
  REQUIRE(cudaReducer().collect(sum.data()).ok());
  size_t wrong = 0;
  for (float v : sum) wrong += v != 4.0f;
  CHECK(wrong == 0);
}

// Device memory owned by one test, freed on scope exit.
struct DeviceBytes {
  explicit DeviceBytes(size_t n) { REQUIRE(cudaMalloc(&ptr, n) == cudaSuccess); }
  ~DeviceBytes() { cudaFree(ptr); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(ptr); }
  void* ptr = nullptr;
};

TEST_CASE("cudaSumDevice handles device pointers at every element offset", "[cuda]") {
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  constexpr size_t kCount = 4099;
  uint32_t seed = 100;
  for (const DType dtype : kAllDTypes) {
    const size_t size = dtypeSize(dtype);
    // Offsets up to 16 bytes cover every combination of dst and src misalignment mod 16: equal
    // ones (peeled head, then 16-byte packs) and unequal ones (element by element).
    const size_t max_offset = 16 / size;
    const Bytes dst = exactData(dtype, kCount, seed++);
    const Bytes src = exactData(dtype, kCount, seed++);
    Bytes cpu = dst;
    cpuSum(cpu.data(), src.data(), kCount, dtype);
    DeviceBytes dst_dev((kCount + max_offset) * size);
    DeviceBytes src_dev((kCount + max_offset) * size);
    for (size_t dst_offset = 0; dst_offset < max_offset; ++dst_offset) {
      for (size_t src_offset = 0; src_offset < max_offset; ++src_offset) {
        CAPTURE(dtypeName(dtype), dst_offset, src_offset);
        unsigned char* d = dst_dev.get() + dst_offset * size;
        unsigned char* s = src_dev.get() + src_offset * size;
        REQUIRE(cudaMemcpy(d, dst.data(), dst.size(), cudaMemcpyHostToDevice) == cudaSuccess);
        REQUIRE(cudaMemcpy(s, src.data(), src.size(), cudaMemcpyHostToDevice) == cudaSuccess);
        const Status status = cudaSumDevice(d, s, kCount, dtype, nullptr);
        REQUIRE(status.ok());
        REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
        Bytes gpu(dst.size());
        REQUIRE(cudaMemcpy(gpu.data(), d, gpu.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
        requireSameElements(dtype, gpu, cpu);
      }
    }
  }
}

TEST_CASE("cudaSumDevice indexes past 2^31 elements", "[cuda]") {
  // 2^31 + 17 uint8 (4 GiB in all): element indices beyond int's range, a tail after the packs.
  const size_t count = (size_t{1} << 31) + 17;
  void* dst = nullptr;
  void* src = nullptr;
  if (cudaMalloc(&dst, count) != cudaSuccess || cudaMalloc(&src, count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    cudaFree(dst);
    WARN("SKIP: not enough device memory for 2 x 2 GiB");
    return;
  }
  REQUIRE(cudaMemset(dst, 1, count) == cudaSuccess);
  REQUIRE(cudaMemset(src, 2, count) == cudaSuccess);
  REQUIRE(cudaSumDevice(dst, src, count, DType::kUInt8, nullptr).ok());
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  for (const size_t at : {size_t{0}, (size_t{1} << 31) - 32, count - 64}) {  // start, across 2^31, end
    CAPTURE(at);
    unsigned char window[64];
    REQUIRE(cudaMemcpy(window, static_cast<unsigned char*>(dst) + at, sizeof(window), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    size_t wrong = 0;
    for (unsigned char v : window) wrong += v != 3;
    CHECK(wrong == 0);
  }
  cudaFree(dst);
  cudaFree(src);
}

TEST_CASE("isDevicePointer tells device and managed memory from host memory", "[cuda]") {
  DeviceBytes device(64);
  CHECK(isDevicePointer(device.get()));
  CHECK(isDevicePointer(device.get() + 13));  // inside an allocation, not only its start
  void* managed = nullptr;
  REQUIRE(cudaMallocManaged(&managed, 64) == cudaSuccess);
  CHECK(isDevicePointer(managed));
  cudaFree(managed);
  void* pinned = nullptr;  // registered host memory: the host reads it, so it is not "device"
  REQUIRE(cudaHostAlloc(&pinned, 64, cudaHostAllocDefault) == cudaSuccess);
  CHECK_FALSE(isDevicePointer(pinned));
  cudaFreeHost(pinned);
  std::vector<char> pageable(64);
  CHECK_FALSE(isDevicePointer(pageable.data()));
  CHECK_FALSE(isDevicePointer(nullptr));
  CHECK(cudaGetLastError() == cudaSuccess);  // the host queries left no sticky error behind
}

TEST_CASE("cudaSumDevice rejects pointers misaligned for the dtype", "[cuda]") {
  DeviceBytes dst(64);
  DeviceBytes src(64);
  const Status status = cudaSumDevice(dst.get() + 1, src.get(), 4, DType::kFloat32, nullptr);
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(cudaSumDevice(dst.get(), src.get(), 0, DType::kFloat64, nullptr).ok());
}

}  // namespace
}  // namespace zps::kernels
