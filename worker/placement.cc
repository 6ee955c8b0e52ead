#include "worker/placement.h"

#include <algorithm>

namespace zps {

std::vector<PartitionInfo> Placement::place(uint64_t tensor_id, size_t bytes, size_t element_size,
                                            size_t partition_bytes) {
  size_t step = std::max(element_size, partition_bytes / element_size * element_size);
  std::vector<PartitionInfo> parts;
  uint64_t index = 0;
  for (size_t offset = 0; offset < bytes; offset += step, ++index) {
    PartitionInfo p;
    p.key = (tensor_id << kKeyPartitionBits) | index;
    p.offset = offset;
    p.bytes = std::min(step, bytes - offset);
    p.server = static_cast<int>(std::min_element(load_.begin(), load_.end()) - load_.begin());
    load_[p.server] += p.bytes + kPerMessageCost;
    parts.push_back(p);
  }
  return parts;
}

}  // namespace zps
