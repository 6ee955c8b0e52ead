// Key placement: how a tensor is cut into partitions and which server each partition goes to.
//
// A tensor of B bytes is cut into partitions of ZPS_PARTITION_BYTES (rounded down to whole elements);
// the last one takes the remainder. Each partition goes to the server with the lowest load so far, where
// a partition's load is its bytes plus kPerMessageCost (the bytes a round trip costs in latency on a fast
// link); ties go to the lowest rank. So large tensors balance bytes, and many small tensors spread out
// by count instead of piling onto one server. Every worker declares the same tensors in the same order,
// so every worker computes the same placement without talking to anyone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "zps/worker.h"

namespace zps {

inline constexpr uint64_t kPerMessageCost = 64 * 1024;
inline constexpr int kKeyPartitionBits = 24;  // key = tensor id << 24 | partition index
// Process sets' key spaces (DeclareOptions::key_space) are numbered 1 .. kMaxKeySpaces - 1.
inline constexpr uint32_t kMaxKeySpaces = 1024;

class Placement {
 public:
  explicit Placement(int num_servers) : load_(num_servers, 0) {}

  // Cuts a tensor and places its partitions. partition_bytes >= element_size > 0, bytes > 0.
  std::vector<PartitionInfo> place(uint64_t tensor_id, size_t bytes, size_t element_size, size_t partition_bytes);

  const std::vector<uint64_t>& load() const { return load_; }

 private:
  std::vector<uint64_t> load_;
};

}  // namespace zps
