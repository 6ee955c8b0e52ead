// Element types a tensor can have. The numeric values travel on the wire (Declare, Tensor and Reply's dtype), so they
// never change; the codec range-checks them before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zps {

enum class DType : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat64 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUInt8 = 6,  // sums wrap modulo 256; used for byte-sized tensors
};

inline constexpr int kNumDTypes = 7;

inline constexpr size_t dtypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
    case DType::kUInt8: return 1;
  }
  return 0;
}

inline constexpr std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
  }
  return "unknown";
}

// Range-checked conversion from a wire or user value.
inline std::optional<DType> dtypeFromInt(uint64_t v) {
  if (v >= static_cast<uint64_t>(kNumDTypes)) return std::nullopt;
  return static_cast<DType>(v);
}

std::optional<DType> dtypeFromName(std::string_view name);

}  // namespace zps
