// RequestTable: the worker's requests in flight, and the one fan-out-and-wait every operation uses.
//
// An operation (a push of one tensor round, a DECLARE to every server, a HELLO round, ...) sends
// one request per partition or server and ends when every request has its reply. The table assigns
// request ids, remembers what each request expects back (where a pulled payload goes), matches
// replies to requests, completes operations, resends overdue requests (ZPS_RESEND_TIMEOUT), says
// which replies are missing when a wait expires, and cancels the requests of an operation whose
// wait failed.
//
// Buffers: a reply's payload is copied into the caller's buffer outside the table's lock (the
// request is marked "delivering" meanwhile), so one large pull never stalls the other requests. A
// wait never returns while such a copy is in progress, and once a wait has failed the operation is
// cancelled: its remaining requests are forgotten, and a late reply for one is dropped (counted,
// logged at PS_VERBOSE), so nothing is written into its buffers after wait() returned.
//
// Requests leave through a RequestRoute (request_route.h). The table's own waits only wait on its
// condition variable, never calling into the transport; a RequestWaiter (request_waiter.h) is the
// wait that lets the caller's thread receive the replies itself.
//
// Owned by the Worker for its whole life. Thread-safe: callers' threads send and wait, the
// transport's I/O thread delivers replies (and so does a caller inside a RequestWaiter), the resend
// thread resends. The route's issued() and completed() are called with the table's lock held, so they
// must not call back into the table; nothing else is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/blob.h"
#include "worker/request_route.h"
#include "zps/worker.h"

namespace zps {

// One operation: what it is (for messages), how many replies it still needs, and its outcome.
struct PendingOp {
  std::string what;  // "push-pull of 'grad' round 3"
  // Called (with the table's lock held) when the last reply arrived, whatever its status; never for
  // a cancelled operation. Dense tensors count the round as received here.
  std::function<void()> on_done;
  // Called (without the lock) after a failed wait cancelled the operation's outstanding requests;
  // returns the status wait() reports (dense tensors add what the caller may retry).
  std::function<Status(const Status&)> on_cancelled;

  int remaining = 0;
  int delivering = 0;  // replies being copied into the caller's buffers right now
  bool cancelled = false;
  Status status;
  std::vector<uint64_t> requests;
};

// An operation's requests, built by one thread and handed to RequestTable::send or run.
struct FanOut {
  std::shared_ptr<PendingOp> op = std::make_shared<PendingOp>();
  std::vector<OutgoingRequest> requests;

  explicit FanOut(std::string what) { op->what = std::move(what); }
};

// What became of a reply.
enum class Delivery { kDelivered, kCancelled, kUnknown };

class RequestTable {
 public:
  using Clock = std::chrono::steady_clock;

  // resend_timeout 0: no resends on a timer (resendTo still resends after a reset). `route` outlives
  // the table.
  RequestTable(RequestRoute* route, std::chrono::milliseconds resend_timeout);

  // A data message with a fresh request id, the current generation and the protocol version; the
  // caller sets its body (a Declare, a Tensor, ...).
  pb::Data newRequest();
  void setGeneration(uint64_t generation);

  // Enters the fan-out's requests and sends them. Fails (and sends nothing) after abort() or while
  // refused; a failed send cancels the whole operation.
  StatusOr<std::shared_ptr<PendingOp>> send(FanOut fan);
  // send, then a handle for wait()/poll().
  StatusOr<Handle> issue(FanOut fan);
  // send and wait; the operation is cancelled when the wait fails.
  Status run(FanOut fan, std::chrono::milliseconds timeout);
  // A handle whose operation has already ended with `status`.
  Handle completed(Status status);

  // Waits for the operation of a handle and releases the handle. When the wait fails (deadline,
  // abort, a failed reply) the operation is cancelled.
  Status wait(Handle handle, std::chrono::milliseconds timeout);
  // True when the handle's operation has ended; the handle stays valid.
  StatusOr<bool> poll(Handle handle) const;
  // Releases a handle without waiting (for a caller that waits on the operation itself).
  std::shared_ptr<PendingOp> take(Handle handle);
  // Waits for an operation without cancelling it: OK, its failure, kAborted, or kDeadlineExceeded
  // naming the missing replies ("2 replies missing after 1.5 s: key 7 from server 1 (host:port)").
  // Never returns while a reply is being copied into the operation's buffers.
  Status waitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout);
  // waitFor with its deadline given; `timeout` is the wait's whole length, for the message.
  Status waitUntil(const std::shared_ptr<PendingOp>& op, Clock::time_point deadline, std::chrono::milliseconds timeout);
  // After a failed wait: cancels the operation and lets it describe the outcome (`failed` when it
  // had ended meanwhile or was OK).
  Status cancelAfter(const std::shared_ptr<PendingOp>& op, const Status& failed);
  // True once the operation has ended, or the table was aborted.
  bool ended(const std::shared_ptr<PendingOp>& op) const;
  // The server every unanswered request of `op` went to, and whether one of them is a scheduled push
  // (its answer comes on the server's push lane where one is open); nullopt when none is left, they
  // went to several servers, or one moves a connection (a HELLO to ipc).
  struct SoleServer {
    int server = 0;
    bool pushes = false;
  };
  std::optional<SoleServer> soleServer(const std::shared_ptr<PendingOp>& op) const;
  // Forgets the operation's requests: their replies are dropped from now on. Returns once no reply
  // is being copied into its buffers any more. False (and nothing done) for an operation that had
  // already ended.
  bool cancel(const std::shared_ptr<PendingOp>& op);

  // Called by the I/O thread for a reply from `server` (the transport's peer, checked); `from`
  // names the server in messages. Copies a pulled payload into the request's buffer and completes
  // it.
  Delivery deliver(int server, const pb::Data& reply, DType dtype, const Blob& payload, const std::string& from);

  // Resends the requests sent at least resend_timeout before `now`. Returns how many.
  int resendOverdue(Clock::time_point now);
  // Resends every unanswered request to `server` (its connection was reset: what was on the wire is
  // lost). Duplicates are harmless: servers count a sync push once per worker, key and round, and
  // answer a repeated pull once. Returns how many.
  int resendTo(int server);

  // The job ended: every wait returns `why` from now on, and so does every send. No reply is copied
  // into a buffer any more, and an aborted wait returns only once no copy is in progress: a program
  // that stops at its first failed wait may free the buffers of every operation.
  void abort(const Status& why);
  std::optional<Status> aborted() const;
  // A node was lost: every pending request fails with `why`, and so does every new send until
  // refuse(nullopt) (recover()).
  void refuse(std::optional<Status> why);

  uint64_t resent() const;
  uint64_t droppedReplies() const;
  size_t pendingCount() const;

 private:
  struct Entry {
    RequestSpec request;
    std::shared_ptr<PendingOp> op;
    std::vector<Blob> frames;  // kept for resends
    Clock::time_point sent;
    bool delivering = false;
  };

  // All called with mu_ held.
  void complete(uint64_t id, const Status& status);
  void forget(const std::shared_ptr<PendingOp>& op);
  std::string missing(const PendingOp& op) const;
  void rememberCancelled(uint64_t id);

  RequestRoute* const route_;
  const std::chrono::milliseconds resend_timeout_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_request_ = 1;
  uint64_t generation_ = 0;
  Handle next_handle_ = 1;
  std::unordered_map<uint64_t, Entry> pending_;
  std::unordered_map<Handle, std::shared_ptr<PendingOp>> handles_;
  // Ids of cancelled requests, so that their late replies are told apart from unknown ones;
  // bounded.
  std::unordered_set<uint64_t> cancelled_;
  std::deque<uint64_t> cancelled_order_;
  std::optional<Status> aborted_;
  std::optional<Status> refused_;
  uint64_t resent_ = 0;
  uint64_t dropped_ = 0;
  int delivering_ = 0;  // replies being copied into buffers, over all operations
};

}  // namespace zps
