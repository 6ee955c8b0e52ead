// Tests for the CPU reducer (kernels/cpu_reducer.cc) and the float16/bfloat16 conversions
// (kernels/half.cc). Data is chosen so every sum is exact or has one known correctly rounded
// answer; results are compared bit for bit.
#include "kernels/reducer.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu_reducer_internal.h"
#include "kernels/cuda_reducer.h"

namespace zps::kernels {
namespace {

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                                DType::kInt32,   DType::kInt64,   DType::kUInt8};

// Writes the integer v as element i of a dtype array at any alignment. Callers keep v small
// enough to be exact in every float type (|v| <= 256 is exact even in bfloat16).
void putInt(DType dtype, unsigned char* base, size_t i, int64_t v) {
  unsigned char* p = base + i * dtypeSize(dtype);
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

// Reads element i back as a double (exact for all values these tests produce).
double getValue(DType dtype, const unsigned char* base, size_t i) {
  const unsigned char* p = base + i * dtypeSize(dtype);
  switch (dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return halfToFloat(h);
    }
    case DType::kBFloat16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bfloat16ToFloat(b);
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DType::kInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DType::kUInt8: return *p;
  }
  return std::nan("");
}

// Small signed values for the float and signed types; uint8 uses the full byte range so that
// roughly half of its sums wrap.
int64_t dstValue(DType dtype, size_t i) {
  if (dtype == DType::kUInt8) return static_cast<int64_t>((i * 37 + 11) % 256);
  return static_cast<int64_t>(i % 29) - 14;
}

int64_t srcValue(DType dtype, size_t i) {
  if (dtype == DType::kUInt8) return static_cast<int64_t>((i * 101 + 200) % 256);
  return static_cast<int64_t>((i * 7) % 23) - 11;
}

double expectedSum(DType dtype, size_t i) {
  const int64_t sum = dstValue(dtype, i) + srcValue(dtype, i);
  if (dtype == DType::kUInt8) return static_cast<double>(sum % 256);
  return static_cast<double>(sum);
}

// A 64-byte aligned dst (as the reducer's contract promises) with one guard element after it.
struct AlignedBytes {
  explicit AlignedBytes(size_t bytes) : storage((bytes + 63) / 64 + 1) {}
  unsigned char* data() { return reinterpret_cast<unsigned char*>(storage.data()); }
  struct alignas(64) Line {
    unsigned char bytes[64];
  };
  std::vector<Line> storage;
};

using SumFn = void (*)(void*, const void*, size_t, DType);

void checkSum(SumFn sum, DType dtype, size_t count, size_t src_offset) {
  CAPTURE(dtypeName(dtype), count, src_offset);
  const size_t size = dtypeSize(dtype);
  AlignedBytes dst((count + 1) * size);
  std::vector<unsigned char> src_storage((count + 1) * size + 8);
  unsigned char* src = src_storage.data() + src_offset;
  for (size_t i = 0; i < count; ++i) {
    putInt(dtype, dst.data(), i, dstValue(dtype, i));
    putInt(dtype, src, i, srcValue(dtype, i));
  }
  // Guard elements: the reducer must stop at count.
  putInt(dtype, dst.data(), count, 3);
  putInt(dtype, src, count, 5);
  const std::vector<unsigned char> src_before(src_storage);

  sum(dst.data(), src, count, dtype);

  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    if (getValue(dtype, dst.data(), i) != expectedSum(dtype, i)) {
      if (mismatches++ < 3) {
        FAIL_CHECK("element " << i << ": got " << getValue(dtype, dst.data(), i) << ", want " << expectedSum(dtype, i));
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(getValue(dtype, dst.data(), count) == 3);
  CHECK(src_storage == src_before);
}

void reducerSum(void* dst, const void* src, size_t count, DType dtype) {
  static const std::unique_ptr<Reducer> reducer = makeCpuReducer();
  const Status status = reducer->sum(dst, src, count, dtype);
  REQUIRE(status.ok());
}

// Sums one element pair, repeated to a length that runs both the vector loops and the scalar
// tails, through cpuSum and through the portable loops; every copy must come out the same.
template <typename T>
T sumOne(DType dtype, T a, T b) {
  constexpr size_t kCount = 67;
  std::vector<T> dst(kCount, a);
  const std::vector<T> src(kCount, b);
  std::vector<T> portable = dst;
  cpuSum(dst.data(), src.data(), kCount, dtype);
  detail::cpuSumPortable(portable.data(), src.data(), kCount, dtype);
  REQUIRE(std::memcmp(portable.data(), dst.data(), kCount * sizeof(T)) == 0);
  for (size_t i = 1; i < kCount; ++i) REQUIRE(std::memcmp(&dst[i], &dst[0], sizeof(T)) == 0);
  return dst[0];
}

bool isHalfNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0; }
bool isBfloat16Nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

TEST_CASE("cpu reducer sums every dtype at odd lengths and misaligned src", "[reducer]") {
  const auto via = GENERATE(as<std::string>{}, "reducer", "cpuSum", "portable");
  CAPTURE(via);
  const SumFn sum = via == "reducer" ? &reducerSum : via == "cpuSum" ? &cpuSum : &detail::cpuSumPortable;
  for (const DType dtype : kAllDTypes) {
    for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, size_t{4099}}) {
      for (size_t offset = 0; offset < 8; ++offset) checkSum(sum, dtype, count, offset);
    }
  }
}

TEST_CASE("cpu reducer reports a dtype outside the enum", "[reducer]") {
  auto reducer = makeCpuReducer();
  CHECK(std::string(reducer->name()) == "cpu");
  float dst = 1, src = 2;
  const Status status = reducer->sum(&dst, &src, 1, static_cast<DType>(42));
  CHECK(status.code() == StatusCode::kInvalidArgument);
  CHECK(dst == 1);
}

// Builds without CUDA, and machines without a GPU, must say why instead of failing obscurely; the
// server falls back to the CPU reducer on kUnavailable.
TEST_CASE("the CUDA reducer explains why it is unavailable", "[reducer][cuda]") {
  std::string why;
  if (cudaDeviceAvailable(&why)) {
    SUCCEED("a CUDA device is usable here; tests/cuda covers it");
    return;
  }
  INFO(why);
  CHECK_FALSE(why.empty());
#ifndef ZPS_HAVE_CUDA
  CHECK(why.find("no CUDA") != std::string::npos);
#endif
  auto made = makeCudaReducer(0);
  REQUIRE_FALSE(made.ok());
  INFO(made.status().toString());
  CHECK(made.status().code() == StatusCode::kUnavailable);
}

TEST_CASE("integer sums wrap around", "[reducer]") {
  CHECK(sumOne<int32_t>(DType::kInt32, std::numeric_limits<int32_t>::max(), 1) == std::numeric_limits<int32_t>::min());
  CHECK(sumOne<int32_t>(DType::kInt32, std::numeric_limits<int32_t>::min(), -1) == std::numeric_limits<int32_t>::max());
  CHECK(sumOne<int32_t>(DType::kInt32, -5, 3) == -2);
  CHECK(sumOne<int64_t>(DType::kInt64, std::numeric_limits<int64_t>::max(), 2) ==
        std::numeric_limits<int64_t>::min() + 1);
  CHECK(sumOne<int64_t>(DType::kInt64, std::numeric_limits<int64_t>::min(), -1) == std::numeric_limits<int64_t>::max());
  CHECK(sumOne<uint8_t>(DType::kUInt8, 200, 100) == 44);
  CHECK(sumOne<uint8_t>(DType::kUInt8, 255, 255) == 254);
  CHECK(sumOne<uint8_t>(DType::kUInt8, 0, 255) == 255);
}

TEST_CASE("float16 sums round once to nearest even", "[reducer][half]") {
  auto sum = [](float a, float b) { return sumOne<uint16_t>(DType::kFloat16, floatToHalf(a), floatToHalf(b)); };
  // Above 2048 the half spacing is 2: odd results are ties and go to the even mantissa.
  CHECK(sum(2048, 1) == floatToHalf(2048));
  CHECK(sum(2050, 1) == floatToHalf(2052));
  CHECK(sum(2048, 3) == floatToHalf(2052));
  CHECK(sum(1, 0.5f) == floatToHalf(1.5f));
  // 65504 is the largest half; 65520 is the tie with the next (infinite) step.
  CHECK(sum(65504, 8) == 0x7bff);
  CHECK(sum(65504, 16) == 0x7c00);
  CHECK(sum(-65504, -16) == 0xfc00);
  // Subnormals add exactly and carry into the smallest normal.
  CHECK(sumOne<uint16_t>(DType::kFloat16, 0x0001, 0x0001) == 0x0002);
  CHECK(sumOne<uint16_t>(DType::kFloat16, 0x03ff, 0x0001) == 0x0400);
  CHECK(sumOne<uint16_t>(DType::kFloat16, 0x8001, 0x0001) == 0x0000);
  CHECK(sumOne<uint16_t>(DType::kFloat16, 0x7c00, 0x3c00) == 0x7c00);
  CHECK(isHalfNan(sumOne<uint16_t>(DType::kFloat16, 0x7c00, 0xfc00)));
  CHECK(isHalfNan(sumOne<uint16_t>(DType::kFloat16, 0x7e00, 0x3c00)));
}

TEST_CASE("bfloat16 sums round once to nearest even", "[reducer][bfloat16]") {
  auto sum = [](float a, float b) {
    return sumOne<uint16_t>(DType::kBFloat16, floatToBfloat16(a), floatToBfloat16(b));
  };
  // Above 256 the bfloat16 spacing is 2.
  CHECK(sum(256, 1) == floatToBfloat16(256));
  CHECK(sum(258, 1) == floatToBfloat16(260));
  CHECK(sum(-3, 5) == floatToBfloat16(2));
  CHECK(sumOne<uint16_t>(DType::kBFloat16, 0x7f7f, 0x7f7f) == 0x7f80);
  CHECK(sumOne<uint16_t>(DType::kBFloat16, 0x0001, 0x0001) == 0x0002);
  CHECK(isBfloat16Nan(sumOne<uint16_t>(DType::kBFloat16, 0x7f80, 0xff80)));
}

// cpuSum may use ISA-specific loops for the 16-bit floats; on every bit pattern (NaNs compared as
// "both NaN") they must agree with the portable loops, which the tests above pin down exactly.
TEST_CASE("16-bit float sums agree between the fast and portable loops", "[reducer][half]") {
  constexpr size_t kCount = 200003;
  std::mt19937 rng(42);
  std::vector<uint16_t> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) {
    a[i] = static_cast<uint16_t>(rng());
    b[i] = static_cast<uint16_t>(rng());
  }
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CAPTURE(dtypeName(dtype));
    auto is_nan = dtype == DType::kFloat16 ? &isHalfNan : &isBfloat16Nan;
    std::vector<uint16_t> fast = a, portable = a;
    cpuSum(fast.data(), b.data(), kCount, dtype);
    detail::cpuSumPortable(portable.data(), b.data(), kCount, dtype);
    size_t mismatches = 0;
    for (size_t i = 0; i < kCount; ++i) {
      if (fast[i] == portable[i] || (is_nan(fast[i]) && is_nan(portable[i]))) continue;
      if (mismatches++ < 3) {
        FAIL_CHECK(std::hex << "0x" << a[i] << " + 0x" << b[i] << ": fast 0x" << fast[i] << ", portable 0x"
                            << portable[i]);
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("float32 and float64 sums are IEEE sums", "[reducer]") {
  CHECK(sumOne<float>(DType::kFloat32, 16777216.0f, 1.0f) == 16777216.0f);
  CHECK(sumOne<float>(DType::kFloat32, 0.1f, 0.2f) == 0.1f + 0.2f);
  CHECK(sumOne<float>(DType::kFloat32, std::numeric_limits<float>::denorm_min(),
                      std::numeric_limits<float>::denorm_min()) == 2 * std::numeric_limits<float>::denorm_min());
  CHECK(sumOne<double>(DType::kFloat64, 9007199254740992.0, 1.0) == 9007199254740992.0);
  CHECK(sumOne<double>(DType::kFloat64, 0.1, 0.2) == 0.1 + 0.2);
}

TEST_CASE("halfToFloat decodes every class of value", "[half]") {
  CHECK(halfToFloat(0x3c00) == 1.0f);
  CHECK(halfToFloat(0xc000) == -2.0f);
  CHECK(halfToFloat(0x3555) == 0x1.554p-2f);
  CHECK(halfToFloat(0x7bff) == 65504.0f);
  CHECK(halfToFloat(0x0400) == 0x1p-14f);
  CHECK(halfToFloat(0x03ff) == 0x3ffp-24f);
  CHECK(halfToFloat(0x0001) == 0x1p-24f);
  CHECK(halfToFloat(0x8001) == -0x1p-24f);
  CHECK(halfToFloat(0x0000) == 0.0f);
  CHECK_FALSE(std::signbit(halfToFloat(0x0000)));
  CHECK(std::signbit(halfToFloat(0x8000)));
  CHECK(halfToFloat(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(halfToFloat(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(halfToFloat(0x7e00)));
  CHECK(std::isnan(halfToFloat(0x7c01)));
  CHECK(std::isnan(halfToFloat(0xffff)));
}

TEST_CASE("floatToHalf rounds to nearest even", "[half]") {
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(floatToHalf(-2.0f) == 0xc000);
  CHECK(floatToHalf(0.0f) == 0x0000);
  CHECK(floatToHalf(-0.0f) == 0x8000);
  // Ties between normals: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  CHECK(floatToHalf(1.0f + 0x1p-11f) == 0x3c00);
  CHECK(floatToHalf(1.0f + 0x3p-11f) == 0x3c02);
  CHECK(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  CHECK(floatToHalf(1.0f + 0x1p-11f - 0x1p-20f) == 0x3c00);
  // Overflow: 65520 is the tie between 65504 and infinity.
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65519.0f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00);
  CHECK(floatToHalf(-1e10f) == 0xfc00);
  CHECK(floatToHalf(std::numeric_limits<float>::max()) == 0x7c00);
  CHECK(floatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(floatToHalf(-std::numeric_limits<float>::infinity()) == 0xfc00);
  // Subnormal results and their ties (the half subnormal step is 2^-24).
  CHECK(floatToHalf(0x1p-24f) == 0x0001);
  CHECK(floatToHalf(-0x1p-24f) == 0x8001);
  CHECK(floatToHalf(0x1p-25f) == 0x0000);
  CHECK(floatToHalf(0x1p-25f + 0x1p-40f) == 0x0001);
  CHECK(floatToHalf(0x3p-25f) == 0x0002);
  CHECK(floatToHalf(0x5p-25f) == 0x0002);
  CHECK(floatToHalf(0x1p-30f) == 0x0000);
  CHECK(floatToHalf(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(floatToHalf(0x3ffp-24f) == 0x03ff);
  CHECK(floatToHalf(0x1p-14f - 0x1p-25f) == 0x0400);
  CHECK(floatToHalf(0x1p-14f) == 0x0400);
  // NaN stays NaN, including a payload only in bits that the conversion drops.
  CHECK(isHalfNan(floatToHalf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(isHalfNan(floatToHalf(std::bit_cast<float>(0x7f800001u))));
  CHECK(isHalfNan(floatToHalf(std::bit_cast<float>(0xff800001u))));
  CHECK((floatToHalf(std::bit_cast<float>(0xffc00000u)) & 0x8000) == 0x8000);
}

TEST_CASE("every half survives a round trip through float", "[half]") {
  size_t failures = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    const bool ok = isHalfNan(static_cast<uint16_t>(h)) ? isHalfNan(back) : back == h;
    if (!ok && failures++ < 3) FAIL_CHECK("half 0x" << std::hex << h << " came back 0x" << back);
  }
  CHECK(failures == 0);
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (libgcc soft-float, correctly rounded) is an independent
// oracle; sweep a spread of float bit patterns plus their neighbours.
TEST_CASE("floatToHalf matches the compiler's _Float16 conversion", "[half]") {
  size_t failures = 0;
  for (uint64_t base = 0; base <= 0xffffffffu; base += 65521) {
    for (uint32_t delta = 0; delta < 3; ++delta) {
      const auto bits = static_cast<uint32_t>(base + delta);
      const float f = std::bit_cast<float>(bits);
      if (std::isnan(f)) continue;
      const auto want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
      const uint16_t got = floatToHalf(f);
      if (got != want && failures++ < 3) {
        FAIL_CHECK("float bits 0x" << std::hex << bits << ": got 0x" << got << ", want 0x" << want);
      }
    }
  }
  CHECK(failures == 0);
}
#endif

TEST_CASE("bfloat16 conversions", "[bfloat16]") {
  CHECK(bfloat16ToFloat(0x3f80) == 1.0f);
  CHECK(bfloat16ToFloat(0xc040) == -3.0f);
  CHECK(bfloat16ToFloat(0x7f7f) == 0x1.fep127f);
  CHECK(bfloat16ToFloat(0x0001) == 0x1p-133f);
  CHECK(bfloat16ToFloat(0x7f80) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(bfloat16ToFloat(0x7fc0)));
  CHECK(std::isnan(bfloat16ToFloat(0x7f81)));

  CHECK(floatToBfloat16(1.0f) == 0x3f80);
  CHECK(floatToBfloat16(-3.0f) == 0xc040);
  CHECK(floatToBfloat16(-0.0f) == 0x8000);
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  CHECK(floatToBfloat16(1.0f + 0x1p-8f) == 0x3f80);
  CHECK(floatToBfloat16(1.0f + 0x3p-8f) == 0x3f82);
  CHECK(floatToBfloat16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  // Subnormal floats keep their top bits and round the same way.
  CHECK(floatToBfloat16(std::bit_cast<float>(0x00010000u)) == 0x0001);
  CHECK(floatToBfloat16(std::bit_cast<float>(0x00008000u)) == 0x0000);
  CHECK(floatToBfloat16(std::bit_cast<float>(0x00018000u)) == 0x0002);
  CHECK(floatToBfloat16(std::bit_cast<float>(0x00008001u)) == 0x0001);
  // Overflow rounds into infinity; infinity and NaN keep their class.
  CHECK(floatToBfloat16(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(floatToBfloat16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(isBfloat16Nan(floatToBfloat16(std::bit_cast<float>(0x7f800001u))));
  CHECK(isBfloat16Nan(floatToBfloat16(std::bit_cast<float>(0x7fffffffu))));
  CHECK(isBfloat16Nan(floatToBfloat16(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("every bfloat16 survives a round trip through float", "[bfloat16]") {
  size_t failures = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const uint16_t back = floatToBfloat16(bfloat16ToFloat(static_cast<uint16_t>(b)));
    const bool ok = isBfloat16Nan(static_cast<uint16_t>(b)) ? isBfloat16Nan(back) : back == b;
    if (!ok && failures++ < 3) FAIL_CHECK("bfloat16 0x" << std::hex << b << " came back 0x" << back);
  }
  CHECK(failures == 0);
}

}  // namespace
}  // namespace zps::kernels
