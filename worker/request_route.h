// What a worker's request is on its way to a server, and the two interfaces of that way (the send
// and receive route, by type):
//
//   caller -> RequestTable -> RequestRoute (Worker::Impl) -> PushScheduler (priority, credit, fusion)
//          -> ServerLinks -> Transport
//   Transport -> Worker::Impl::handleReply (the I/O thread) -> RequestTable::deliver
//   a caller in RequestWaiter -> ServerLinks as ReplyReceiver -> Transport::receiveOn -> handleReply
//          -> deliver
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/blob.h"
#include "ps/transport/transport.h"
#include "zps/worker.h"

namespace zps {

// What one request expects back.
struct RequestSpec {
  int server = 0;
  std::optional<PeerId> via;  // a connection other than the server's current one (moving to ipc)
  uint64_t key = 0;
  uint64_t round = 0;  // a sum key's PUSH, PULL or PUSH_PULL: its round (push hints name rounds)
  DType dtype = DType::kUInt8;
  // A pull's destination (null: the reply carries no payload for us).
  uint8_t* out = nullptr;
  size_t bytes = 0;
  // pullRows: the reply's i-th row goes to row positions[i] of `out` (rows of row_dim floats).
  std::shared_ptr<const std::vector<uint32_t>> positions;
  uint32_t row_dim = 0;
  // Checks or records the answer (HELLO's MAC, the ipc offer, STATS) before its payload is copied;
  // a failed status fails the request. Called outside the table's lock.
  std::function<Status(const pb::Data&)> on_reply;
  // Priority scheduling (worker/scheduling/push_scheduler.h): with a priority the request waits in its
  // server's queue (lower first) and holds `credit` bytes of the server's push credit until
  // completed (a pull holds none); without one it is sent at once. `id` is the request's id
  // (RequestTable::newRequest).
  std::optional<int64_t> priority;
  size_t credit = 0;
  uint64_t id = 0;
  // > 0: a dense PUSH, PULL or PUSH_PULL that may travel fused with others ready for the same server
  // (worker/scheduling/fusion.h); the bytes it counts toward a fused message (its partition's).
  size_t fuse_bytes = 0;

  // A push that holds push credit (priority scheduling): it travels on its server's push lane where
  // one is open (worker/server_links.h), and so does its answer.
  bool scheduledPush() const { return priority && credit > 0; }

  // A request to `server` about `key`; callers that receive data also set out/bytes (or positions).
  static RequestSpec to(int server, uint64_t key = 0, DType dtype = DType::kUInt8) {
    RequestSpec r;
    r.server = server;
    r.key = key;
    r.dtype = dtype;
    return r;
  }
};

// For the observer's per-server metrics: what a request moves (absent for HELLO, DECLARE, ...).
struct RequestTrace {
  int command = 0;
  uint64_t round = 0;
  size_t bytes = 0;
  std::string tensor;
  size_t rows = 0;
};

// One request of a fan-out: its id (from RequestTable::newRequest), what it expects and its frames.
struct OutgoingRequest {
  OutgoingRequest() = default;
  OutgoingRequest(const pb::Data& d, RequestSpec r, std::vector<Blob> f, std::optional<RequestTrace> t = std::nullopt)
      : id(d.request_id()), request(std::move(r)), frames(std::move(f)), trace(std::move(t)) {}

  uint64_t id = 0;
  RequestSpec request;
  std::vector<Blob> frames;
  std::optional<RequestTrace> trace;
};

// A request on its way to the transport: where it goes and its frames (header, then the payload if any).
struct ReadyRequest {
  RequestSpec to;
  std::vector<Blob> frames;
};

// Where the request table sends its requests, and who hears of them. Implemented by the worker
// (worker_impl.h), which hands them to its PushScheduler; by fakes in the unit tests.
class RequestRoute {
 public:
  virtual ~RequestRoute() = default;
  // Sends one request's frames: a new request, or a resend. Called without the table's lock.
  virtual Status send(const RequestSpec& to, std::vector<Blob> frames) = 0;
  // Sends a new fan-out's requests together, so that they can travel fused (worker/scheduling/
  // fusion.h); resends use send(). By default send() for each, stopping at the first failure.
  virtual Status sendAll(std::vector<ReadyRequest> requests);
  // "server 1 (host:port)", for messages.
  virtual std::string describeServer(int server) const = 0;
  // A request entered the table, and one ended (ok: answered without an error; false: failed or
  // cancelled). Called with the table's lock held: they must not call into the table.
  virtual void issued(uint64_t /*id*/, const OutgoingRequest& /*request*/) {}
  virtual void completed(uint64_t /*id*/, bool /*ok*/) {}
  // The table was aborted or refused: waits in progress must look at it again (RequestWaiter's
  // receivers are woken). Called without the table's lock.
  virtual void wakeWaiters() {}
};

// Lets a caller that waits for the replies of one server receive them on its own thread
// (Transport::receiveOn), so that a reply wakes one thread instead of two. Implemented by
// ServerLinks; used by RequestWaiter.
class ReplyReceiver {
 public:
  virtual ~ReplyReceiver() = default;
  // Receives and delivers `server`'s replies until done() or the deadline; false when it could not
  // (the wait then goes on as the I/O thread delivers). `pushes`: an unanswered request of the wait
  // is a scheduled push, whose answer comes on the server's push lane where one is open.
  virtual bool receiveFrom(int server, bool pushes, std::chrono::steady_clock::time_point deadline,
                           const std::function<bool()>& done) = 0;
  // Threads inside receiveFrom check their done() again (after an abort or a refusal).
  virtual void wakeReceivers() = 0;
  // Called with true before a wait that the I/O thread ends, and with false after it
  // (Transport::beginWaitOnIoThread).
  virtual void waitOnIoThread(bool begin) = 0;
};

}  // namespace zps
