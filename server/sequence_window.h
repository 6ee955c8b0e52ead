// SequenceWindow: which of one pusher's async pushes of one key a server has applied, so that each
// is applied exactly once whatever the network does (a resend after a lost acknowledgement, a copy
// the network duplicated, a push overtaken by a later one).
//
// A pusher (a worker's local rank) numbers its async pushes of a key 1, 2, 3, ... in the header's
// push_seq. The window holds the newest number applied and which of the kWindow numbers up to it were
// applied: 16 bytes per (pusher, key), whatever the job's length. A number not yet applied is applied;
// one applied before is a duplicate, answered like the first without being applied again. The worker
// keeps every unanswered push of a key within kWindow numbers of its oldest unanswered one
// (worker/async_sequence.h), so an honest number is never older than the window nor more than
// kWindow past the newest; either is refused (a hostile or broken peer), as is 0 (no number).
//
// Value type, owned by the SumStore or ParamStore entry of its key and used by the engine thread that
// owns that key. A new generation (ZPS_RECOVERY) starts every store, so every window, afresh.
#pragma once

#include <cstdint>
#include <string>

#include "ps/wire/codec.h"

namespace zps {

class SequenceWindow {
 public:
  static constexpr uint64_t kWindow = wire::kAsyncPushWindow;
  static_assert(kWindow == 64, "mask_ holds one bit per number of the window");

  enum class Verdict { kApply, kDuplicate, kRefused };
  // What to do with push number `seq`; *why says why a refused one is refused.
  Verdict check(uint64_t seq, std::string* why) const;
  // Records that push `seq` was applied (after check() said kApply).
  void applied(uint64_t seq);
  uint64_t newest() const { return newest_; }

 private:
  uint64_t newest_ = 0;  // the newest number applied; 0: none yet
  uint64_t mask_ = 0;    // bit i: number newest_ - i was applied
};

// Process-wide: async pushes answered as duplicates (for the server's closing log line and tests).
void countDuplicateAsyncPush();
uint64_t duplicateAsyncPushes();

}  // namespace zps
