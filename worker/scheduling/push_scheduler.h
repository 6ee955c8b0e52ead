// PushScheduler: the worker's queue of data requests in front of the server links, for priority
// scheduling (ZPS_PRIORITY, DeclareOptions::priority; docs/performance.md#priority-scheduling).
//
// A request with a priority (RequestSpec::priority) waits in its server's queue, ordered by
// priority (lower first: the first layer of the next forward pass is needed first), then by
// arrival. Pushes hold the bytes they send (RequestSpec::credit) until the server acknowledges them,
// at most ZPS_CREDIT_BYTES per server. The head of a queue leaves when the bytes in flight plus its
// own fit in the credit, or when nothing is in flight (a request larger than the credit still goes,
// alone); a pull holds no credit and leaves as soon as it is at the head. A request gives its credit
// back when the request table completes it: its reply came, it failed, or its operation was
// cancelled (a cancelled request still queued is dropped, so its buffer is not read any more).
//
// Why credits cannot deadlock here: only pushes hold credit, and a server answers a PUSH as soon as
// it has taken it, whatever the other workers did, so every push leaves in time and every round
// completes. A push-pull is therefore scheduled as a PUSH followed by a PULL of the same round;
// credit held on a PUSH_PULL until its reply would wait for other workers' pushes, which may be
// queued behind their own credit. For the same reason no credit is held by pulls: a pull waits at
// the server until the other workers' pushes of its round arrive, and those may be issued only
// after this worker's other pulls are answered (threads that issue in different orders), so a
// bound on outstanding pulls can deadlock. (A reply credit, ZPS_REPLY_CREDIT_BYTES, did exactly that
// with threads issuing at once; it was also not measurably faster, and was removed.)
//
// Push hints (ZPS_PUSH_HINTS): a round completes only when every worker has pushed it, but each
// worker's queue drains at its own pace, so when a new gradient preempts a large tensor, workers have
// sent different parts of it, and each part's round waits for the slowest worker to get back to it
// (the pulls of the next forward pass wait with it). A server's answer to a scheduled push names the
// rounds of its keys that wait for this worker alone: every other worker has pushed them
// (Reply.awaited). hurry() moves this worker's queued push and pull of each such round to the
// head of the queue, ahead of every priority: its push completes the round, and the pulls of every
// worker are answered. Hurried requests keep their priority order among themselves. (Naming every
// round some other worker had pushed made each worker follow the others' order, which is close to
// arrival order: ResNet-50 on the emulated cluster lost all of priority's gain, docs/performance-history.md.)
//
// Requests without a priority (every request when scheduling is off) are sent at once, without
// the lock. What leaves together for one server (a fan-out's requests, those one pump releases, or
// those released by the answers of one fused reply: Deferral) travels fused (worker/scheduling/fusion.h). A resend of a
// request still queued is dropped (it will leave in its turn); a resend of one in flight is sent at once and holds no
// more credit.
//
// Owned by the Worker for its whole life; the links' send function outlives it. Thread-safe:
// callers' threads send through the request table's send hook; the table's completed hook (the I/O
// thread, or a thread cancelling a wait, with the table's lock held) releases credit and sends what
// then fits. Sending happens under this class's lock, so each queue's requests reach the transport
// in queue order; the send function must not block or call back into the request table.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/common/blob.h"
#include "worker/request_table.h"
#include "worker/scheduling/credit_gauge.h"
#include "worker/scheduling/fusion.h"

namespace zps {

class PushScheduler {
 public:
  using Send = std::function<Status(const RequestSpec& to, std::vector<Blob> frames)>;

  // credit_bytes: the bytes of pushes in flight per server (at least 1); fusion (ZPS_FUSION_BYTES,
  // default: off): the requests one pump releases together travel fused (worker/scheduling/fusion.h).
  PushScheduler(size_t credit_bytes, Send send, FusionPolicy fusion = {});

  // The credit chosen once the job's layout is known (ps/node/job_layout.h): called by the worker's
  // start() before any request is sent, so no other thread reads it yet.
  void setCredit(size_t credit_bytes) { credit_bytes_ = std::max<size_t>(1, credit_bytes); }
  // ZPS_CREDIT_BYTES=auto: from now on the credit follows the acknowledgements of the scheduled pushes
  // (worker/scheduling/credit_gauge.h), from the credit set (one partition) up to `ceiling`. Called by start(), as
  // setCredit.
  void adaptCredit(size_t ceiling, int servers);
  // "push credit per server 65536 bytes (2.0 MB/s acknowledged at most, shortest round trip 10.2 ms)";
  // empty when the credit is fixed or no scheduled push was acknowledged.
  std::string creditReport() const;

  // The request table's send hook: sends now, or queues a request with a priority.
  Status send(const RequestSpec& to, std::vector<Blob> frames);
  // The request table's send_all hook: a new fan-out's requests. Those with a priority are all queued
  // before any leaves, then what fits leaves together; the others go at once. Small ones for one
  // server travel fused (worker/scheduling/fusion.h).
  Status sendAll(std::vector<ReadyRequest> ready);

  // While one is alive on a thread, the completions that thread reports give credit back without
  // sending; when the last one ends, each queue sends what then fits, together (fused). The worker
  // holds one while it delivers the answers of one fused reply.
  class Deferral {
   public:
    explicit Deferral(PushScheduler* scheduler);
    ~Deferral();
    Deferral(const Deferral&) = delete;
    Deferral& operator=(const Deferral&) = delete;

   private:
    PushScheduler* const scheduler_;
  };
  // The request table's completed hook: gives back the request's credit (or drops it from its
  // queue) and sends the queued requests that now fit.
  void completed(uint64_t id);
  // Push hints from `server`'s reply: its queued requests of those rounds go to the head of its queue.
  // They leave when the queue is next pumped (the completion of the push the reply answers).
  void hurry(int server, const google::protobuf::RepeatedPtrField<pb::AwaitedRound>& awaited);

  // recover(): every request was failed; forgets what is queued and the credit held, including a
  // request a concurrent refusal completed before it reached send().
  void clear();

  size_t queued() const;  // queued requests, every server
  size_t inFlightBytes(int server) const;
  uint64_t hurried() const;  // requests moved to the head by push hints, since the start

 private:
  // Where a request waits: hurried ones (push hints) first, then by priority, then by arrival.
  struct Order {
    bool hurried = false;
    int64_t priority = 0;
    uint64_t arrival = 0;
    bool operator<(const Order& o) const {
      if (hurried != o.hurried) return hurried;
      return std::tie(priority, arrival) < std::tie(o.priority, o.arrival);
    }
  };
  struct Queued {
    RequestSpec to;
    std::vector<Blob> frames;
  };
  // One server's queue and the credit its requests hold (at most credit_bytes_).
  struct ServerQueue {
    std::map<Order, Queued> waiting;
    size_t in_flight = 0;  // credit held by requests sent and not completed
  };
  enum class State { kQueued, kSent };
  struct Known {
    int server = 0;
    size_t credit = 0;
    CreditGauge::Clock::time_point sent_at{};  // once sent
    State state = State::kQueued;
    Order order;  // where it waits, while queued
  };

  // Takes a scheduled request: the queue it was queued in, or null (a resend). Called with mu_ held.
  ServerQueue* admit(const RequestSpec& to, std::vector<Blob> frames);
  // Sends the head of a queue while it fits, the requests released together fused. Called with mu_ held.
  void pump(ServerQueue& queue);
  // pump(), or later while a Deferral is alive on this thread. Called with mu_ held.
  void pumpOrDefer(ServerQueue& queue);

  size_t credit_bytes_;                 // set before the first send (setCredit), then by gauge_
  std::unique_ptr<CreditGauge> gauge_;  // ZPS_CREDIT_BYTES=auto; null: a fixed credit
  const Send send_;
  const FusionPolicy fusion_;

  mutable std::mutex mu_;
  uint64_t arrivals_ = 0;
  std::unordered_map<int, ServerQueue> queues_;  // by server
  std::vector<ServerQueue*> deferred_;           // queues to pump when this thread's Deferral ends (values of queues_)
  std::unordered_map<uint64_t, Known> known_;    // scheduled requests, queued or in flight
  std::atomic<size_t> scheduled_{0};             // known_.size(), read without the lock
  uint64_t hurried_ = 0;
};

}  // namespace zps
