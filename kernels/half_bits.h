// Inline float16/bfloat16 <-> float32 conversions on raw bits, private to kernels/.
//
// Every function is branch-free so that the reduction loops in cpu_reducer.cc auto-vectorise with
// plain SSE2/AVX2 integer and float instructions; no F16C or AVX512-BF16 is required. half.cc
// exports out-of-line copies through kernels/reducer.h.
#pragma once

#include <bit>
#include <cstdint>

namespace zps::kernels::detail {

// Bitwise select. A ?: whose arms contain float arithmetic is turned back into a branch by GCC
// under its default -ftrapping-math (it will not speculate a float op), and a branch stops the
// vectoriser; masking keeps every arm unconditional.
inline uint32_t selectBits(bool condition, uint32_t if_true, uint32_t if_false) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (if_true & mask) | (if_false & ~mask);
}

inline float halfBitsToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  // Normal numbers: move exponent and mantissa into float position and rebias 15 -> 127.
  const uint32_t normal = (magnitude << 13) + ((127u - 15u) << 23);
  // Inf/NaN: the float exponent is all ones; the mantissa (and so NaN-ness and quietness) carries
  // over.
  const uint32_t inf_nan = (magnitude << 13) | 0x7f800000u;
  // Subnormals (and zero) are mantissa * 2^-24; the int -> float conversion and the power-of-two
  // scale are both exact, so this needs no normalisation loop.
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(magnitude)) * 0x1p-24f);
  const uint32_t bits = selectBits(magnitude >= 0x7c00u, inf_nan, selectBits(magnitude < 0x0400u, subnormal, normal));
  return std::bit_cast<float>(bits | sign);
}

inline uint16_t floatToHalfBits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  // Quiet the NaN (set the top mantissa bit) so a payload living only in the low 13 bits cannot
  // turn into infinity.
  const uint32_t nan = 0x7e00u | ((ax >> 13) & 0x03ffu);
  // Normal results: rebias, then round to nearest even by adding 0x0fff plus the lowest kept bit.
  // A carry out of the mantissa bumps the exponent, which is exactly right, including 65520 and
  // above rounding to infinity (exponent 31, mantissa 0).
  const uint32_t rebased = ax - ((127u - 15u) << 23);
  const uint32_t normal = (rebased + 0x0fffu + ((ax >> 13) & 1u)) >> 13;
  // Results below 2^-14: adding 0.5f puts the value's bits at the float ulp 2^-24, which is the
  // half subnormal ulp, so the FPU's own round-to-nearest-even does the rounding. The difference of
  // the bit patterns is then the half encoding (0x400 when it rounds up to the smallest normal).
  const float small = std::bit_cast<float>(ax) + 0.5f;
  const uint32_t subnormal = std::bit_cast<uint32_t>(small) - 0x3f000000u;
  const uint32_t bits = selectBits(
      ax > 0x7f800000u, nan, selectBits(ax >= 0x47800000u, 0x7c00u, selectBits(ax < 0x38800000u, subnormal, normal)));
  return static_cast<uint16_t>(bits | sign);
}

inline float bfloat16BitsToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t floatToBfloat16Bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // Round to nearest even on the dropped 16 bits; overflow carries into infinity correctly.
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  // NaN keeps sign and upper payload and is forced quiet so it cannot round into infinity.
  const uint32_t nan = (x >> 16) | 0x0040u;
  const bool is_nan = (x & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(selectBits(is_nan, nan, rounded));
}

}  // namespace zps::kernels::detail
