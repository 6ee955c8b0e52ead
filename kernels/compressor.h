// The gradient compressors behind include/zps/compression.h: the worker's encoder (with error feedback
// for the sparse compressors) and the server's decoders, which add a payload into a float32 sum.
//
// Payload layouts, in host byte order like every zps payload, at any alignment:
//   fp16:   n x uint16, IEEE binary16 bits (round to nearest even);
//   sparse: count x uint32 indices, strictly increasing and below n, then count x float32 values.
// The decoders trust their payload: ps/wire/codec validates it before anything else sees it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "zps/compression.h"

namespace zps::kernels {

inline constexpr size_t kSparseEntryBytes = sizeof(uint32_t) + sizeof(float);

// Elements a sparse compressor sends of n: max(1, ceil(ratio x n)), at most n.
size_t sparseCount(double ratio, size_t n);

// dst[i] = (first ? 0 : dst[i]) + the payload's element i, for i < n.
void addFp16(float* dst, const uint8_t* half_bits, size_t n, bool first);
void addSparse(float* dst, size_t n, const uint8_t* payload, size_t count, bool first);

// Compresses the pushes of one partition (n float32 elements) of one tensor, round after round. Not
// thread-safe; the worker serialises the pushes of a tensor.
class GradientCompressor {
 public:
  // kind is not kNone. ratio in (0, 1] is used by the sparse kinds; seed makes randomk reproducible.
  GradientCompressor(Compressor kind, double ratio, size_t n, uint64_t seed);

  Compressor kind() const { return kind_; }
  size_t maxPayloadBytes() const;
  // Encodes grad[0..n) (any alignment) into out (maxPayloadBytes() bytes) and returns the payload size.
  // *sent receives the entries of a sparse payload (0 for fp16). Sparse kinds first add the residual
  // of earlier rounds, send the chosen elements of that total and keep the rest as the new residual.
  // randomk sends k elements of a random permutation per round and all of it every ceil(n / k) rounds
  // (the last round of such a cycle sends what is left, possibly fewer than k).
  size_t compress(const void* grad, uint8_t* out, size_t* sent);

  // What earlier rounds have not sent yet (sparse kinds; empty for fp16).
  const std::vector<float>& residual() const { return residual_; }

 private:
  void chooseTopK();
  void chooseRandomK();

  const Compressor kind_;
  const size_t n_;
  const size_t k_;
  std::vector<float> residual_;
  std::vector<uint32_t> chosen_;  // the indices sent this round (topk: scratch over all n; the first k_)
  std::vector<uint32_t> order_;   // randomk: the permutation being walked
  size_t next_ = 0;               // randomk: its first index not sent yet
  std::mt19937_64 rng_;
};

}  // namespace zps::kernels
