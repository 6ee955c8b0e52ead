#include "kernels/compressor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/half_bits.h"

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define ZPS_COMPRESSOR_X86 1
#else
#define ZPS_COMPRESSOR_X86 0
#endif

namespace zps::kernels {
namespace {

float loadFloat(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Orders elements by magnitude; NaN counts as the largest, so it is sent (as a dense push would) and
// the comparison stays a strict weak order.
float magnitude(float v) { return std::isnan(v) ? INFINITY : std::fabs(v); }

// The portable fp16 loops are compute-bound (a few ns per element, slower than loopback TCP), so x86
// CPUs with F16C convert 8 lanes per instruction, exactly as floatToHalfBits/halfBitsToFloat do.
void encodeFp16Portable(const uint8_t* src, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = detail::floatToHalfBits(loadFloat(src + i * sizeof(float)));
    std::memcpy(out + i * sizeof(h), &h, sizeof(h));
  }
}

void addFp16Portable(float* dst, const uint8_t* half_bits, size_t n, bool first) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, half_bits + i * sizeof(h), sizeof(h));
    const float v = detail::halfBitsToFloat(h);
    dst[i] = first ? v : dst[i] + v;
  }
}

#if ZPS_COMPRESSOR_X86
bool haveF16c() {
  // F16C from CPUID leaf 1 (ECX): clang's __builtin_cpu_supports does not know "f16c".
  static const bool have = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return have;
}

__attribute__((target("avx2,f16c"))) void encodeFp16Avx2(const uint8_t* src, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(reinterpret_cast<const float*>(src + 4 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  encodeFp16Portable(src + 4 * i, out + 2 * i, n - i);
}

__attribute__((target("avx2,f16c"))) void addFp16Avx2(float* dst, const uint8_t* half_bits, size_t n, bool first) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(half_bits + 2 * i)));
    if (!first) v = _mm256_add_ps(v, _mm256_loadu_ps(dst + i));
    _mm256_storeu_ps(dst + i, v);
  }
  addFp16Portable(dst + i, half_bits + 2 * i, n - i, first);
}
#endif

}  // namespace

size_t sparseCount(double ratio, size_t n) {
  if (n == 0) return 0;
  // The slack keeps a product like 0.07 x 1000 = 70.000000000000014 from rounding up to 71.
  const double k = std::ceil(ratio * static_cast<double>(n) - 1e-6);
  return k >= static_cast<double>(n) ? n : std::max<size_t>(1, static_cast<size_t>(k));
}

void addFp16(float* dst, const uint8_t* half_bits, size_t n, bool first) {
#if ZPS_COMPRESSOR_X86
  if (haveF16c()) return addFp16Avx2(dst, half_bits, n, first);
#endif
  addFp16Portable(dst, half_bits, n, first);
}

void addSparse(float* dst, size_t n, const uint8_t* payload, size_t count, bool first) {
  if (first) std::fill_n(dst, n, 0.0f);
  const uint8_t* values = payload + count * sizeof(uint32_t);
  for (size_t i = 0; i < count; ++i) {
    uint32_t index;
    std::memcpy(&index, payload + i * sizeof(index), sizeof(index));
    dst[index] += loadFloat(values + i * sizeof(float));
  }
}

GradientCompressor::GradientCompressor(Compressor kind, double ratio, size_t n, uint64_t seed)
    : kind_(kind), n_(n), k_(kind == Compressor::kFp16 ? 0 : sparseCount(ratio, n)), rng_(seed) {
  if (kind_ == Compressor::kTopK || kind_ == Compressor::kRandomK) residual_.assign(n_, 0.0f);
  if (kind_ == Compressor::kTopK) chosen_.resize(n_);
  if (kind_ == Compressor::kRandomK) {
    chosen_.reserve(k_);
    order_.resize(n_);
    std::iota(order_.begin(), order_.end(), 0u);
    next_ = n_;  // the first round draws the first permutation
  }
}

size_t GradientCompressor::maxPayloadBytes() const {
  return kind_ == Compressor::kFp16 ? n_ * sizeof(uint16_t) : k_ * kSparseEntryBytes;
}

size_t GradientCompressor::compress(const void* grad, uint8_t* out, size_t* sent) {
  const auto* in = static_cast<const uint8_t*>(grad);
  if (kind_ == Compressor::kFp16) {
    *sent = 0;
#if ZPS_COMPRESSOR_X86
    if (haveF16c()) {
      encodeFp16Avx2(in, out, n_);
      return n_ * sizeof(uint16_t);
    }
#endif
    encodeFp16Portable(in, out, n_);
    return n_ * sizeof(uint16_t);
  }
  // Error feedback: compress the gradient plus everything earlier rounds held back.
  for (size_t i = 0; i < n_; ++i) residual_[i] += loadFloat(in + i * sizeof(float));
  if (kind_ == Compressor::kTopK)
    chooseTopK();
  else
    chooseRandomK();
  const size_t count = kind_ == Compressor::kTopK ? k_ : chosen_.size();
  uint8_t* values = out + count * sizeof(uint32_t);
  for (size_t i = 0; i < count; ++i) {
    const uint32_t index = chosen_[i];
    std::memcpy(out + i * sizeof(index), &index, sizeof(index));
    std::memcpy(values + i * sizeof(float), &residual_[index], sizeof(float));
    residual_[index] = 0.0f;  // sent: nothing of it is held back any more
  }
  *sent = count;
  return count * kSparseEntryBytes;
}

void GradientCompressor::chooseTopK() {
  std::iota(chosen_.begin(), chosen_.end(), 0u);
  const float* r = residual_.data();
  if (k_ < n_) {
    std::nth_element(chosen_.begin(), chosen_.begin() + static_cast<ptrdiff_t>(k_), chosen_.end(),
                     [r](uint32_t a, uint32_t b) { return magnitude(r[a]) > magnitude(r[b]); });
  }
  // The wire wants increasing indices (so the codec can reject repeats in one pass).
  std::sort(chosen_.begin(), chosen_.begin() + static_cast<ptrdiff_t>(k_));
}

void GradientCompressor::chooseRandomK() {
  // Walks a random permutation of the indices, k at a time, and draws a new one once it is used up:
  // random choices, yet every element goes out once per ceil(n / k) rounds, so nothing waits in the
  // residual for longer than two such cycles. A cycle's last round sends what is left of it.
  if (next_ == n_) {
    std::shuffle(order_.begin(), order_.end(), rng_);
    next_ = 0;
  }
  const size_t take = std::min(k_, n_ - next_);
  chosen_.assign(order_.begin() + static_cast<ptrdiff_t>(next_), order_.begin() + static_cast<ptrdiff_t>(next_ + take));
  next_ += take;
  std::sort(chosen_.begin(), chosen_.end());
}

}  // namespace zps::kernels
