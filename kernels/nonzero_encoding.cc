#include "kernels/nonzero_encoding.h"

#include <cstring>

namespace zps::kernels {

namespace {

uint32_t bitsAt(const uint8_t* src, size_t i) {
  uint32_t bits;
  std::memcpy(&bits, src + i * sizeof(bits), sizeof(bits));
  return bits;
}

}  // namespace

size_t countNonzero(const void* src, size_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += bitsAt(bytes, i) != 0;
  return count;
}

void encodeNonzero(const void* src, size_t n, uint8_t* out) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  uint8_t* values = out + nonzeroBitmapBytes(n);
  for (size_t base = 0; base < n; base += 8) {
    const size_t end = base + 8 < n ? base + 8 : n;
    uint8_t byte = 0;
    for (size_t i = base; i < end; ++i) {
      const uint32_t bits = bitsAt(bytes, i);
      if (bits == 0) continue;
      byte |= static_cast<uint8_t>(1u << (i - base));
      std::memcpy(values, &bits, sizeof(bits));
      values += sizeof(float);
    }
    out[base / 8] = byte;
  }
}

void addNonzero(void* dst, size_t n, const uint8_t* payload, bool first) {
  auto* out = static_cast<uint8_t*>(dst);
  const uint8_t* values = payload + nonzeroBitmapBytes(n);
  for (size_t base = 0; base < n; base += 8) {
    const size_t end = base + 8 < n ? base + 8 : n;
    const uint8_t byte = payload[base / 8];
    for (size_t i = base; i < end; ++i) {
      float v = 0.0f;
      if (byte & (1u << (i - base))) {
        std::memcpy(&v, values, sizeof(v));
        values += sizeof(v);
      }
      if (!first) {
        float sum;
        std::memcpy(&sum, out + i * sizeof(sum), sizeof(sum));
        v = sum + v;
      }
      std::memcpy(out + i * sizeof(v), &v, sizeof(v));
    }
  }
}

}  // namespace zps::kernels
