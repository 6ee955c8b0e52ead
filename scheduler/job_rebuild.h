// JobRebuild: what a scheduler that restarted in a running job (ZPS_RECOVERY) learns from the nodes that
// register again: the job's generation, and how many barriers of each group were released in it. A
// node that heard of a recovery (a lost node, its rank held for a replacement) reports the generation
// it is recovering into, so the rebuilt job goes on with that recovery: the book it sends at last is
// of the new generation, which is the nodes' cue to recover. Barrier counts are taken only from nodes
// of the newest generation: a node still in an older one counted that generation's barriers.
//
// Pure logic, owned by the scheduler's logic thread.
#pragma once

#include <array>
#include <cstdint>

#include "proto/zps.pb.h"

namespace zps {

class JobRebuild {
 public:
  // A node that held a rank in the running job registered again (rejoin). True for the first.
  bool note(const pb::Register& reg);
  // A node registered afresh (not as the holder of a rank): in a rebuilt job it replaces a node lost
  // while no scheduler could tell the others, or one whose loss was announced. Either way the job goes
  // on in a generation after the reported one, so every node recovers (an announced loss then costs
  // one generation number more than needed), and its barriers count from 0.
  void noteNewcomer() { newcomer_ = true; }
  bool active() const { return active_; }
  uint64_t generation() const { return generation_ + (newcomer_ ? 1 : 0); }
  // Barriers of `group` released so far in generation(), the most any node of it has seen.
  uint64_t released(pb::BarrierGroup group) const { return newcomer_ ? 0 : released_[static_cast<size_t>(group) & 3]; }

 private:
  bool active_ = false;
  bool newcomer_ = false;
  uint64_t generation_ = 0;
  std::array<uint64_t, 4> released_{};
};

}  // namespace zps
