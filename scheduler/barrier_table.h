// BarrierTable: group barriers counted by sender. Each node numbers its barriers per group (1, 2, ...);
// an arrival counts once per node and generation, so a duplicated or replayed barrier message can never
// release a barrier early. Pure logic, owned by the scheduler's logic thread.
#pragma once

#include <array>
#include <cstdint>
#include <set>

#include "proto/zps.pb.h"
#include "ps/transport/transport.h"

namespace zps {

class BarrierTable {
 public:
  enum class Result { kWaiting, kReleased, kDuplicate, kStale, kAhead };

  // `sequence` is the sender's n-th barrier in this group; `group_size` the number of members.
  // The caller has checked that the sender belongs to the group and that group is valid.
  Result arrive(pb::BarrierGroup group, PeerId sender, uint64_t sequence, size_t group_size);
  // The number of barriers released so far in a group.
  uint64_t generation(pb::BarrierGroup group) const { return state_[index(group)].generation; }
  size_t waiting(pb::BarrierGroup group) const { return state_[index(group)].arrived.size(); }
  // A restarted scheduler takes over a running job: `released` barriers of the group are behind it
  // (the most any node has seen released; a node that missed the last release sends that barrier
  // again, gets kStale, and is sent the release).
  void restore(pb::BarrierGroup group, uint64_t released) { state_[index(group)].generation = released; }
  // A node registered again from a new connection: its arrivals count as the new peer's.
  void rebind(PeerId from, PeerId to);
  // Whether a node of role `r` takes part in barriers of `g`.
  static bool inGroup(pb::BarrierGroup g, pb::Role r) {
    return g == pb::GROUP_ALL || (g == pb::GROUP_WORKERS && r == pb::WORKER) ||
           (g == pb::GROUP_SERVERS && r == pb::SERVER);
  }

 private:
  struct GroupState {
    uint64_t generation = 0;
    std::set<PeerId> arrived;
  };
  static size_t index(pb::BarrierGroup g) { return static_cast<size_t>(g) & 3; }
  std::array<GroupState, 4> state_;
};

}  // namespace zps
