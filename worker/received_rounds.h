// ReceivedRounds: which rounds of one tensor a worker is done with, for Tensor.received_through.
// A round is done on the push side when the replies to its push (or push-pull) came back, and on the
// pull side when the replies to its pull (or push-pull) did; an error reply counts, since the worker
// never resends an answered request. Rounds are numbered per side in call order, so every round up to
// through() has been sent on both sides and answered: the worker will never send or resend a request
// of such a round, and the servers may free those results (server/sum_store.h). A round that timed
// out stays open, so its result stays on the servers for the resend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>

namespace zps {

class ReceivedRounds {
 public:
  // Marks `round` done on the push side, the pull side, or both (a push-pull).
  void done(uint64_t round, bool push_side, bool pull_side) {
    if (push_side) pushes_.add(round);
    if (pull_side) pulls_.add(round);
  }
  uint64_t through() const { return std::min(pushes_.through, pulls_.through); }

 private:
  // Rounds done so far: all of 1..through, plus those done out of order beyond it.
  struct Contiguous {
    uint64_t through = 0;
    std::set<uint64_t> beyond;
    void add(uint64_t round) {
      if (round <= through) return;
      beyond.insert(round);
      while (!beyond.empty() && *beyond.begin() == through + 1) {
        ++through;
        beyond.erase(beyond.begin());
      }
    }
  };
  Contiguous pushes_, pulls_;
};

}  // namespace zps
