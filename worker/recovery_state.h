// RecoveryState: which generation of the job's address book this worker uses, and whether it is
// recovering from a lost node (ZPS_RECOVERY).
//
// A node is lost: the scheduler, a server ahead of us or another local rank announces a newer
// generation. From then on every pending request fails with kUnavailable, and so does every new one
// (the RequestTable refuses them), until recover() has moved to the newest announced generation.
//
// Owned by the Worker for its whole life. Thread-safe: the SchedulerClient's thread, the
// transport's I/O thread, the recovery watch thread and callers' threads (recover()) all use it. It
// calls the RequestTable with its own lock held; the table never calls back.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include "worker/request_table.h"

namespace zps {

class RecoveryState {
 public:
  explicit RecoveryState(RequestTable* requests) : requests_(requests) {}

  uint64_t generation() const;
  // The generation of the address book the worker started with.
  void start(uint64_t generation);

  // `announced` is a generation newer than ours: the job recovers. Returns true when it is newer
  // (the caller relays it to the node's other local ranks); the first such notice fails every
  // pending request with `why` (kUnavailable).
  bool notice(uint64_t announced, const Status& why);
  // Why operations fail now; nullopt when not recovering.
  std::optional<Status> pending() const;
  bool recovering() const { return pending().has_value(); }
  // recover() reconnected in `generation`. True when that ends the recovery; false when a still
  // newer generation was announced meanwhile (recover() starts over).
  bool moved(uint64_t generation);

 private:
  RequestTable* const requests_;
  mutable std::mutex mu_;
  uint64_t generation_ = 0;
  uint64_t announced_ = 0;  // the newest generation the scheduler, a server or a
                            // local rank told us of
  std::optional<Status> recovering_;
};

}  // namespace zps
