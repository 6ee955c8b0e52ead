// Gradient compression of pushes (README "Gradient compression"). A worker compresses what it pushes of a
// float32 tensor; the servers decompress, sum in float32 and return the dense sum.
//   none     the dense float32 payload;
//   fp16     every element rounded to IEEE half: half the bytes (values beyond +-65504 become infinite);
//   topk     the k largest-magnitude elements of each partition (k = ratio x elements), as index/value pairs;
//   randomk  k elements of each partition chosen at random, as index/value pairs: a random permutation
//            walked k elements per round, so every element goes out once every ceil(1 / ratio) rounds.
// topk and randomk keep error feedback on the worker: what a round did not send is added to the tensor's
// next push, so over many rounds every gradient element reaches the servers. Pulls return the dense sum.
#pragma once

#include <optional>
#include <string_view>

namespace zps {

enum class Compressor { kNone, kFp16, kTopK, kRandomK };

inline constexpr std::string_view compressorName(Compressor c) {
  switch (c) {
    case Compressor::kNone: return "none";
    case Compressor::kFp16: return "fp16";
    case Compressor::kTopK: return "topk";
    case Compressor::kRandomK: return "randomk";
  }
  return "unknown";
}

inline constexpr std::string_view kCompressorNames = "none, fp16, topk or randomk";

inline std::optional<Compressor> compressorFromName(std::string_view name) {
  for (Compressor c : {Compressor::kNone, Compressor::kFp16, Compressor::kTopK, Compressor::kRandomK})
    if (compressorName(c) == name) return c;
  return std::nullopt;
}

// Sparse compressors send max(1, ceil(ratio x elements)) elements of each partition per round.
inline constexpr double kDefaultCompressRatio = 0.01;

}  // namespace zps
