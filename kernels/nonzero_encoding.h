// The nonzero encoding: a lossless encoding of a float32 payload that leaves out its elements that are
// +0.0. Gradients of models with ReLUs hold many: a unit that no row of a batch activates has a zero
// gradient for every one of its weights, and so does every weight from such a unit into the next
// layer (half of a DLRM's MLP gradients at batch 512). Pushes and sums then cross a link in about half
// the bytes, and every bit that arrives is the bit that was sent: -0.0, NaNs and denormals travel as
// values, and an element left out is +0.0 exactly.
//
// Layout (ENCODING_NONZERO, host byte order, at any alignment): a bitmap of ceil(n / 8) bytes, bit
// (i % 8) of byte (i / 8) set when element i travels, bits past n clear; then one float32 per set bit,
// in element order. The count of set bits travels beside it (Tensor.sparse_count, Reply.sparse_count).
// The decoder trusts its payload: ps/wire/codec checks the size and the bitmap's count first.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zps::kernels {

inline constexpr uint64_t nonzeroBitmapBytes(uint64_t n) { return n / 8 + (n % 8 != 0); }
// The encoding's size for n elements of which `count` travel; the caller keeps n within the payload
// limit, so this cannot overflow.
inline constexpr uint64_t nonzeroEncodedBytes(uint64_t n, uint64_t count) {
  return nonzeroBitmapBytes(n) + count * sizeof(float);
}

// The float32 elements of src[0, n) (any alignment) whose bits are not all zero: what would travel.
size_t countNonzero(const void* src, size_t n);

// Whether encoding n elements of which `count` travel saves enough to be worth the work: at least an
// eighth of the dense bytes.
inline constexpr bool nonzeroWorthIt(uint64_t n, uint64_t count) {
  return nonzeroEncodedBytes(n, count) * 8 <= n * sizeof(float) * 7;
}

// Writes the encoding of the float32 elements src[0, n) (any alignment) into out
// (nonzeroEncodedBytes(n, countNonzero(src, n)) bytes).
void encodeNonzero(const void* src, size_t n, uint8_t* out);

// dst[i] = (first ? +0.0 : dst[i]) + element i, for every i < n: bit for bit what adding (or, first,
// copying) the dense payload gives, an element left out being added as +0.0 (which turns a -0.0 sum
// into +0.0, as the dense addition does).
// dst holds n float32 elements at any alignment.
void addNonzero(void* dst, size_t n, const uint8_t* payload, bool first);

}  // namespace zps::kernels
