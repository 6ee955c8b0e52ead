// AsyncSequence: numbers one tensor's or table's async pushes from this process (1, 2, 3, ...; the
// push_seq of a Tensor or Rows body, the same in every request of one push and in its resends), so
// that servers apply each exactly once (server/sequence_window.h). A server remembers wire::kAsyncPushWindow
// numbers per (pusher, key), so a push waits to be numbered until its number is within that window of
// the oldest push still unanswered: a late resend of that one is then still told apart from a
// duplicate.
//
// Shared (shared_ptr) by its tensor or table and the on_done / on_cancelled hooks of that key's pushes
// in flight, so it outlives a recover() that forgets the tensor (a new declare starts a new one at 1).
// Thread-safe: callers' threads number pushes, the I/O thread and waiters end them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "zps/status.h"

namespace zps {

class AsyncSequence {
 public:
  // The next number, once it is within the window of the oldest unanswered push; fails after
  // `timeout` naming `what` and the push it waited for.
  StatusOr<uint64_t> begin(std::chrono::milliseconds timeout, const std::string& what);
  // Push `seq` was answered (or will never be: cancelled, failed).
  void end(uint64_t seq);
  // Pushes numbered and not ended yet.
  size_t unanswered() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable ended_;
  uint64_t last_ = 0;
  std::set<uint64_t> unanswered_;
};

}  // namespace zps
