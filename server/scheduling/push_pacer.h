// PushPacer: a server shares its link out evenly among the workers pushing to it (priority
// scheduling, ZPS_PUSH_PACING_BYTES; docs/performance.md#priority-scheduling) by holding back the
// acknowledgements, and so the push credit, of a worker that is ahead of the others.
//
// Why: every worker pushes the same bytes to a server each step, and a round is summed only when the
// last worker's push of it is in. The workers' flows into one server compete on its link with each
// other and, on each worker's own link, with that worker's flows to the other servers; on the
// emulated cluster one of them regularly got 4.5-5 MB/s into a server where the others got 5.4-6.3,
// so every round on that server waited for it, and the step's late layers were summed seconds late.
// A worker holds at most its credit (ZPS_CREDIT_BYTES) of unacknowledged pushes per server, so an
// acknowledgement held here stops that worker's next push to this server: its link then carries its
// pushes to the other servers, and this server's link the pushes of the worker behind.
//
// How: the dispatcher reports each credit-holding PUSH as it arrives (arrived(): the worker and its
// bytes). An engine offers every answer it makes; the acknowledgement of such a push leaves at once
// unless its worker has pushed more than `lead` bytes beyond the slowest worker that is still pushing
// here (one whose push arrived within `active`; a worker that computes, or is done, is not waited
// for); else it waits until that worker is back within the lead, or for at most `deadline`. When a
// wait runs to its deadline, the held worker's excess is forgiven (its count drops to the slowest
// one's plus the lead), so a worker kept behind by something holding back the others cannot fix (its
// own link, its compute) costs them at most one deadline.
//
// The price: a held worker may be the last one some round here waits for, and that round waits too.
// Not holding such a worker (at all, or past 25 ms) took most of the gain away on the emulated
// cluster, since a worker ahead in bytes is usually behind on a few rounds; where the CPUs and not a
// link are the limit (loopback) the held rounds cost more than even shares gain, hence off by default.
//
// Why it cannot deadlock: only acknowledgements wait here, never a request, and every one leaves by
// its deadline.
//
// Thread-safe: the dispatcher reports arrivals and sends what they release, engines offer from their
// threads, the server's main loop expires. Callers send what a call returns, outside the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/sum_store.h"

namespace zps {

class PushPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // lead: the bytes a worker may push beyond the slowest active worker before its acknowledgements
  // wait (0: never); active: how recently a worker must have pushed to be waited for; deadline: the
  // longest an acknowledgement waits.
  PushPacer(int num_workers, uint64_t lead, Clock::duration active = std::chrono::milliseconds(100),
            Clock::duration deadline = std::chrono::milliseconds(100));

  bool enabled() const { return lead_ > 0; }
  // A credit-holding PUSH (its Data) of `bytes` from `worker` arrived on `peer`; appends to *send the held
  // acknowledgements that may now leave.
  void arrived(PeerId peer, const pb::Data& push, int worker, uint64_t bytes, std::vector<Outgoing>* send,
               Clock::time_point now = Clock::now());
  // An answer an engine made: appended to *send now, or held.
  void offer(Outgoing o, std::vector<Outgoing>* send, Clock::time_point now = Clock::now());
  // offer() for each of *answers, which then holds what leaves now, in order.
  void offerAll(std::vector<Outgoing>* answers);
  // Releases what waited past the deadline, and what may leave now; appends it to *send.
  void expire(Clock::time_point now, std::vector<Outgoing>* send);
  // A new generation (ZPS_RECOVERY): counts start over; held acknowledgements are dropped (their
  // connections are gone with the generation).
  void clear();

  // A worker's announced pushes whose acknowledgements are not yet offered are forgotten beyond this.
  static constexpr size_t kMaxAnnounced = 1 << 16;

  // For tests and the server's summary, since the start: acknowledgements that waited, and of them
  // those released by the deadline.
  uint64_t held() const;
  uint64_t expired() const;
  uint64_t pushedBytes(int worker) const;

 private:
  struct Held {
    Outgoing ack;
    Clock::time_point since;
  };
  struct Worker {
    uint64_t pushed = 0;  // bytes of credit-holding pushes that arrived (less what was forgiven)
    Clock::time_point last_push{};
    std::deque<Held> held;  // in arrival order
  };
  struct Announced {
    int worker;
    uint64_t bytes;
  };

  // The slowest active worker's pushed bytes. Called with mu_ held.
  uint64_t slowest(Clock::time_point now) const;
  bool mayLeave(const Worker& w, Clock::time_point now) const { return w.pushed <= slowest(now) + lead_; }
  // Sends each worker's held acknowledgements that may leave now or waited past the deadline.
  void releaseReady(Clock::time_point now, std::vector<Outgoing>* send);

  const uint64_t lead_;
  const Clock::duration active_;
  const Clock::duration deadline_;
  std::atomic<bool> used_{false};  // a credit-holding push arrived
  mutable std::mutex mu_;
  std::vector<Worker> workers_;
  std::unordered_map<PeerId, std::unordered_map<uint64_t, Announced>> announced_;  // peer -> request id ->
  size_t holding_ = 0;                                                             // acknowledgements held now
  uint64_t held_ = 0;
  uint64_t expired_ = 0;
};

}  // namespace zps
