// PushScheduler: the worker's queue of data requests in front of the server links, for priority
// scheduling (ZPS_PRIORITY, DeclareOptions::priority; docs/performance.md#priority-scheduling).
//
// A request with a priority (RequestSpec::priority) waits in its server's queue, ordered by
// priority (lower first: the first layer of the next forward pass is needed first), then by
// arrival. The head of a queue leaves when the bytes in flight to that server plus its own credit
// (RequestSpec::credit) fit in the server's credit (ZPS_CREDIT_BYTES), or when nothing is in flight
// to that server (a request larger than the credit still goes, alone); one that holds no credit
// leaves as soon as it is at the head. A request gives its credit
// back when the request table completes it: its reply came, it failed, or its operation was
// cancelled (a cancelled request still queued is dropped, so its buffer is not read any more).
//
// Why credits cannot deadlock here: only pushes hold credit, and a server answers a PUSH as soon
// as it has taken it, whatever the other workers did. A push-pull is therefore scheduled as a PUSH
// (holding credit until that acknowledgement) followed by a PULL of the same round (holding none,
// which the server answers when every worker's push is in). Credit held on a PUSH_PULL until its
// reply would wait for other workers' pushes, which may be queued behind their own credit.
//
// Requests without a priority (every request when scheduling is off) are sent at once, without
// the lock. A resend of a request still queued is dropped (it will leave in its turn); a resend of
// one in flight is sent at once and holds no more credit.
//
// Owned by the Worker for its whole life; the links' send function outlives it. Thread-safe:
// callers' threads send through the request table's send hook; the table's completed hook (the I/O
// thread, or a thread cancelling a wait, with the table's lock held) releases credit and sends what
// then fits. Sending happens under this class's lock, so each server's requests reach the
// transport in queue order; the send function must not block or call back into the request table.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/common/blob.h"
#include "worker/request_table.h"

namespace zps {

class PushScheduler {
 public:
  using Send = std::function<Status(const RequestSpec& to, std::vector<Blob> frames)>;

  // credit_bytes: the bytes of pushes in flight per server (at least 1).
  PushScheduler(size_t credit_bytes, Send send);

  // The request table's send hook: sends now, or queues a request with a priority.
  Status send(const RequestSpec& to, std::vector<Blob> frames);
  // The request table's completed hook: gives back the request's credit (or drops it from its
  // queue) and sends the queued requests that now fit.
  void completed(uint64_t id);

  // recover(): every request was failed; forgets what is queued and the credit held, including a
  // request a concurrent refusal completed before it reached send().
  void clear();

  size_t queued() const;
  size_t inFlightBytes(int server) const;

 private:
  using Order = std::pair<int64_t, uint64_t>;  // (priority, arrival)
  struct Queued {
    RequestSpec to;
    std::vector<Blob> frames;
  };
  struct Server {
    std::map<Order, Queued> queue;
    size_t in_flight = 0;  // credit held by requests sent and not completed
  };
  struct Known {
    int server = 0;
    size_t credit = 0;
    bool sent = false;
    Order order;  // where it waits, until sent
  };

  // Sends the head of `server`'s queue while it fits. Called with mu_ held.
  void pump(int server);

  const size_t credit_bytes_;
  const Send send_;

  mutable std::mutex mu_;
  uint64_t arrivals_ = 0;
  std::unordered_map<int, Server> servers_;
  std::unordered_map<uint64_t, Known> known_;  // scheduled requests, queued or in flight
  std::atomic<size_t> scheduled_{0};           // known_.size(), read without the lock
};

}  // namespace zps
