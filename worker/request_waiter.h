// RequestWaiter: waits for a worker operation the fastest way. When every reply still missing comes
// from one server, the waiting thread receives them itself (the ReplyReceiver: ServerLinks over
// Transport::receiveOn), so that a reply wakes one thread instead of the I/O thread and then this one;
// otherwise it tells the receiver that it waits for replies the I/O thread delivers, and waits on the
// RequestTable. The table itself never calls into the transport while it waits.
//
// Used for the waits on the data path (Worker::wait, the local path's push-pulls); declarations,
// HELLO and checkpoints wait on the table alone (their sends hand their connections to the I/O thread).
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "worker/request_route.h"
#include "worker/request_table.h"

namespace zps {

class RequestWaiter {
 public:
  explicit RequestWaiter(RequestTable* table) : table_(table) {}

  // From now on waits receive through `receiver` (null: never). The receiver outlives its use: detach
  // it (null) before destroying it.
  void receiveWith(ReplyReceiver* receiver) { receiver_.store(receiver); }
  // Threads inside the receiver look at their operations again (the table was aborted or refused).
  void wakeReceivers();

  // As RequestTable::wait and waitFor.
  Status wait(Handle handle, std::chrono::milliseconds timeout);
  Status waitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout);

 private:
  RequestTable* const table_;
  std::atomic<ReplyReceiver*> receiver_{nullptr};
};

}  // namespace zps
