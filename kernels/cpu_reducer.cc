// The CPU reducer: dst[i] += src[i] for every zps dtype.
//
// Mostly the compiler's auto-vectoriser does the work (this file is built with -O3): each dtype is
// one simple loop over memcpy loads and stores, which GCC and Clang turn into unaligned vector
// loads. On x86-64 every loop is also cloned for AVX2 and picked at load time (ifunc), so the
// binary runs on any x86-64 machine and still uses 256-bit registers where they exist.
//
// The 16-bit floats are the exception: their portable bit-twiddling conversions vectorise but are
// compute-bound (~5x slower than float32 per byte), so on x86-64 with AVX2 (+F16C for float16)
// they use a few intrinsics instead and run at memory speed like the other dtypes.
#include <glog/logging.h>

#include <cstring>

#include "kernels/cpu_reducer_internal.h"
#include "kernels/half_bits.h"
#include "kernels/reducer.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#include <immintrin.h>
#define ZPS_KERNEL_X86 1
#define ZPS_KERNEL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ZPS_KERNEL_X86 0
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
inline __attribute__((always_inline)) void sumLoop(Byte* __restrict dst, const Byte* __restrict src, size_t count,
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
// double rounding cannot change the result. Every path below (and the CUDA kernel) computes
// exactly that, so all of them agree bit for bit on non-NaN data.
ZPS_KERNEL_CLONES void sumFloat16Portable(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint16_t>(dst, src, count, [](uint16_t a, uint16_t b) {
    return detail::floatToHalfBits(detail::halfBitsToFloat(a) + detail::halfBitsToFloat(b));
  });
}

ZPS_KERNEL_CLONES void sumBFloat16Portable(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint16_t>(dst, src, count, [](uint16_t a, uint16_t b) {
    return detail::floatToBfloat16Bits(detail::bfloat16BitsToFloat(a) + detail::bfloat16BitsToFloat(b));
  });
}

#if ZPS_KERNEL_X86

// vcvtph2ps / vcvtps2ph convert 8 lanes exactly (subnormals included; the explicit rounding
// immediate ignores MXCSR), which is what floatToHalfBits/halfBitsToFloat do one lane at a time.
__attribute__((target("avx2,f16c"))) void sumFloat16Avx2(Byte* dst, const Byte* src, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    auto* d = reinterpret_cast<__m128i*>(dst + 2 * i);
    const auto* s = reinterpret_cast<const __m128i*>(src + 2 * i);
    const __m256 sum = _mm256_add_ps(_mm256_cvtph_ps(_mm_loadu_si128(d)), _mm256_cvtph_ps(_mm_loadu_si128(s)));
    _mm_storeu_si128(d, _mm256_cvtps_ph(sum, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  sumFloat16Portable(dst + 2 * i, src + 2 * i, count - i);
}

// Rounds 8 float32 lanes to bfloat16 (round to nearest even); the result sits in the low 16 bits
// of each lane. Unlike floatToBfloat16Bits it needs no NaN case: a NaN sum of two widened
// bfloat16 values has zero low 16 bits (x86 returns an operand's NaN, quieted, or the default
// NaN), so the rounding add cannot carry out of its payload.
__attribute__((target("avx2"))) inline __m256i roundToBfloat16(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
}

// Interleaving zeros below each bfloat16 is the exact widening to float32. The unpacks and the
// final pack all work within 128-bit halves, so element order comes back unchanged.
__attribute__((target("avx2"))) void sumBFloat16Avx2(Byte* dst, const Byte* src, size_t count) {
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    auto* d = reinterpret_cast<__m256i*>(dst + 2 * i);
    const auto* s = reinterpret_cast<const __m256i*>(src + 2 * i);
    const __m256i a = _mm256_loadu_si256(d);
    const __m256i b = _mm256_loadu_si256(s);
    const __m256 low = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, a)),
                                     _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, b)));
    const __m256 high = _mm256_add_ps(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, a)),
                                      _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, b)));
    _mm256_storeu_si256(d, _mm256_packus_epi32(roundToBfloat16(low), roundToBfloat16(high)));
  }
  sumBFloat16Portable(dst + 2 * i, src + 2 * i, count - i);
}

bool haveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

bool haveAvx2F16c() {
  static const bool have = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return have;
}

#endif  // ZPS_KERNEL_X86

void sumFloat16(Byte* dst, const Byte* src, size_t count) {
#if ZPS_KERNEL_X86
  if (haveAvx2F16c()) {
    sumFloat16Avx2(dst, src, count);
    return;
  }
#endif
  sumFloat16Portable(dst, src, count);
}

void sumBFloat16(Byte* dst, const Byte* src, size_t count) {
#if ZPS_KERNEL_X86
  if (haveAvx2()) {
    sumBFloat16Avx2(dst, src, count);
    return;
  }
#endif
  sumBFloat16Portable(dst, src, count);
}

ZPS_KERNEL_CLONES void sumUInt32(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint32_t>(dst, src, count, [](uint32_t a, uint32_t b) { return a + b; });
}

ZPS_KERNEL_CLONES void sumUInt64(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint64_t>(dst, src, count, [](uint64_t a, uint64_t b) { return a + b; });
}

ZPS_KERNEL_CLONES void sumUInt8(Byte* __restrict dst, const Byte* __restrict src, size_t count) {
  sumLoop<uint8_t>(dst, src, count, [](uint8_t a, uint8_t b) { return static_cast<uint8_t>(a + b); });
}

// Returns false only for a dtype value outside the enum (a caller bug; the codec range-checks
// wire values before they get here).
bool sumAny(void* dst, const void* src, size_t count, DType dtype, bool portable) {
  auto* d = static_cast<Byte*>(dst);
  const auto* s = static_cast<const Byte*>(src);
  switch (dtype) {
    case DType::kFloat32: sumFloat32(d, s, count); return true;
    case DType::kFloat16: portable ? sumFloat16Portable(d, s, count) : sumFloat16(d, s, count); return true;
    case DType::kBFloat16: portable ? sumBFloat16Portable(d, s, count) : sumBFloat16(d, s, count); return true;
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
    if (!sumAny(dst, src, count, dtype, /*portable=*/false)) {
      return InvalidArgument("cpu reducer: unknown dtype value " + std::to_string(static_cast<int>(dtype)));
    }
    return Status::OK();
  }
};

}  // namespace

std::unique_ptr<Reducer> makeCpuReducer() { return std::make_unique<CpuReducer>(); }

Status Reducer::start(void* dst, const void* src, size_t count, DType dtype) {
  const size_t size = dtypeSize(dtype);
  if (size == 0) return InvalidArgument("unknown dtype value " + std::to_string(static_cast<int>(dtype)));
  std::memcpy(dst, src, count * size);
  return Status::OK();
}

Status Reducer::applyRows(const OptimizerConfig& config, uint32_t dim, size_t rows, const uint32_t* slots,
                          const uint64_t* steps, const float* grads, float* values, float* state) {
  applyOptimizerRows(config, dim, rows, slots, steps, grads, values, state);
  return Status::OK();
}

void cpuSum(void* dst, const void* src, size_t count, DType dtype) {
  if (!sumAny(dst, src, count, dtype, /*portable=*/false)) {
    LOG(DFATAL) << "cpuSum: unknown dtype value " << static_cast<int>(dtype);
  }
}

void detail::cpuSumPortable(void* dst, const void* src, size_t count, DType dtype) {
  if (!sumAny(dst, src, count, dtype, /*portable=*/true)) {
    LOG(DFATAL) << "cpuSumPortable: unknown dtype value " << static_cast<int>(dtype);
  }
}

}  // namespace zps::kernels
