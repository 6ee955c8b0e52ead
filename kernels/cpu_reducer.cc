// The CPU reducer: dst[i] += src[i] for every zps dtype.
//
// Speed comes from the compiler's auto-vectoriser (this file is built with -O3), not from
// intrinsics: each dtype is one simple loop over memcpy loads and stores, which GCC and Clang turn
// into unaligned vector loads. On x86-64 every loop is also cloned for AVX2 and picked at load time
// (ifunc), so the binary stays portable to any x86-64 machine and still uses 256-bit registers
// where they exist.
#include <cstring>

#include <glog/logging.h>

#include "kernels/half_bits.h"
#include "kernels/reducer.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define ZPS_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZPS_KERNEL_CLONES
#endif

namespace zps::kernels {
namespace {

using Byte = unsigned char;

// src may sit at any byte offset (it points into a receive buffer), so dereferencing it as T* would
// be undefined behaviour; memcpy of sizeof(T) compiles to a single (unaligned) load or store.
template <typename T>
inline T load(const Byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void store(Byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// T is the storage type (raw bits for the 16-bit floats, unsigned for the integers so that
// overflow wraps instead of being undefined). __restrict lets the vectoriser skip its runtime
// overlap check: dst and src never partially overlap (dst is the reducer's own buffer).
template <typename T, typename Add>
inline __attribute__((always_inline)) void sumLoop(Byte* __restrict dst,
                                                   const Byte* __restrict src, size_t count,
                                                   Add add) {
  for (size_t i = 0; i < count; ++i) {
    const size_t offset = i * sizeof(T);
    store<T>(dst + offset, add(load<T>(dst + offset), load<T>(src + offset)));
  }
}

ZPS_KERNEL_CLONES void sumFloat32(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<float>(dst, src, count, [](float a, float b) { return a + b; });
}

ZPS_KERNEL_CLONES void sumFloat64(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<double>(dst, src, count, [](double a, double b) { return a + b; });
}

// Summing two 16-bit floats in float32 and rounding once is the correctly rounded 16-bit sum:
// float32 carries at least 2p+2 significand bits for p = 11 (half) and p = 8 (bfloat16), so the
// double rounding cannot change the result. The CUDA kernel does the same, so both agree bit for bit.
ZPS_KERNEL_CLONES void sumFloat16(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint16_t>(dst, src, count, [](uint16_t a, uint16_t b) {
    return detail::floatToHalfBits(detail::halfBitsToFloat(a) + detail::halfBitsToFloat(b));
  });
}

ZPS_KERNEL_CLONES void sumBFloat16(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint16_t>(dst, src, count, [](uint16_t a, uint16_t b) {
    return detail::floatToBfloat16Bits(detail::bfloat16BitsToFloat(a) +
                                       detail::bfloat16BitsToFloat(b));
  });
}

ZPS_KERNEL_CLONES void sumUInt32(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint32_t>(dst, src, count, [](uint32_t a, uint32_t b) { return a + b; });
}

ZPS_KERNEL_CLONES void sumUInt64(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint64_t>(dst, src, count, [](uint64_t a, uint64_t b) { return a + b; });
}

ZPS_KERNEL_CLONES void sumUInt8(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint8_t>(dst, src, count,
                   [](uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + b); });
}

// Returns false only for a dtype value outside the enum (a caller bug; the codec range-checks
// wire values before they get here).
bool sumAny(void* dst, const void* src, size_t count, DType dtype) {
  auto* d = static_cast<Byte*>(dst);
  const auto* s = static_cast<const Byte*>(src);
  switch (dtype) {
    case DType::kFloat32: sumFloat32(d, s, count); return true;
    case DType::kFloat16: sumFloat16(d, s, count); return true;
    case DType::kBFloat16: sumBFloat16(d, s, count); return true;
    case DType::kFloat64: sumFloat64(d, s, count); return true;
    // Two's complement: the unsigned sum has the same bits as the wrapped signed sum.
    case DType::kInt32: sumUInt32(d, s, count); return true;
    case DType::kInt64: sumUInt64(d, s, count); return true;
    case DType::kUInt8: sumUInt8(d, s, count); return true;
  }
  return false;
}

// The CPU Reducer. Stateless, so one per engine thread costs nothing; owned by whoever called
// makeCpuReducer and called only from that owner's thread (though any thread would be safe).
class CpuReducer final : public Reducer {
 public:
  const char* name() const override { return "cpu"; }

  Status sum(void* dst, const void* src, size_t count, DType dtype) override {
    if (!sumAny(dst, src, count, dtype)) {
      return InvalidArgument("cpu reducer: unknown dtype value " +
                             std::to_string(static_cast<int>(dtype)));
    }
    return Status::OK();
  }
};

}  // namespace

std::unique_ptr<Reducer> makeCpuReducer() { return std::make_unique<CpuReducer>(); }

void cpuSum(void* dst, const void* src, size_t count, DType dtype) {
  if (!sumAny(dst, src, count, dtype)) {
    LOG(DFATAL) << "cpuSum: unknown dtype value " << static_cast<int>(dtype);
  }
}

}  // namespace zps::kernels
