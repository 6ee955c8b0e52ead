#include "scheduler/barrier_table.h"

namespace zps {

BarrierTable::Result BarrierTable::arrive(pb::BarrierGroup group, PeerId sender, uint64_t sequence, size_t group_size) {
  GroupState& g = state_[index(group)];
  if (sequence <= g.generation) return Result::kStale;     // a replay of a barrier already released
  if (sequence > g.generation + 1) return Result::kAhead;  // a node cannot be two barriers ahead
  if (!g.arrived.insert(sender).second) return Result::kDuplicate;
  if (g.arrived.size() < group_size) return Result::kWaiting;
  g.arrived.clear();
  ++g.generation;
  return Result::kReleased;
}

void BarrierTable::rebind(PeerId from, PeerId to) {
  for (GroupState& g : state_)
    if (g.arrived.erase(from) > 0) g.arrived.insert(to);
}

}  // namespace zps
