// ReplyWindow: a server's answers to the workers' ordered pulls (priority scheduling,
// ZPS_REPLY_WINDOW_BYTES; docs/performance.md#priority-scheduling), sent by priority instead of in
// the order their rounds complete.
//
// Why: a round's answer is ready when its last push arrives, and answers of rounds completed together
// would otherwise go into the connection at once, in completion order. The connection's ZeroMQ pipe
// and TCP send buffer then hold megabytes, and the sum of an urgent first layer, completed a moment
// later, waits behind all of them (up to about 250 ms per reply in traces of the emulated cluster).
// Keeping at most a window of unacknowledged answer bytes per connection keeps that queue short, and
// what waits here waits in priority order. Off by default: there it did not make ResNet-50's
// iteration faster (docs/performance-history.md#2026-12-02-reply-windows-resnet-50-on-the-emulated-cluster).
//
// How: the dispatcher announces each ordered PULL (expect(): its connection, request id, priority and
// the worker's window). An engine offers every answer it makes; an answer to an announced pull leaves
// at once while its connection's unacknowledged bytes plus its own fit in the window (or nothing is
// unacknowledged: a larger one goes alone), else it waits, lower priority first, then by arrival. It
// leaves with wants_received set; the worker's CMD_RECEIVED names it, and its bytes return to the
// window, which sends what then fits. Any other answer passes through untouched.
//
// Why it cannot deadlock or stall: only answers that are ready wait here, never a request, and a
// worker acknowledges every answer as it arrives, whatever else it waits for. An answer that is not
// acknowledged within the deadline (its connection was reset, or the acknowledgement was lost) counts
// as received, so a window never stays closed.
//
// Thread-safe: engines offer from their threads, the dispatcher announces and acknowledges from the
// I/O thread, the server's main loop expires. Callers send what a call returns, outside the lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/server/sum_store.h"

namespace zps {

class ReplyWindow {
 public:
  using Clock = std::chrono::steady_clock;

  // deadline: how long an answer may go unacknowledged before it counts as received.
  explicit ReplyWindow(Clock::duration deadline = std::chrono::seconds(1)) : deadline_(deadline) {}

  // An ordered PULL arrived: its answer goes by `priority` through a window of `window` bytes on `peer`.
  // A connection keeps at most kMaxExpected announced pulls; beyond that an answer passes through.
  void expect(PeerId peer, uint64_t request_id, int64_t priority, uint64_t window);
  // An answer an engine made: appended to *send now, or kept until it fits.
  void offer(Outgoing o, std::vector<Outgoing>* send);
  // offer() for each of *answers, which then holds what leaves now, in order.
  void offerAll(std::vector<Outgoing>* answers);
  // CMD_RECEIVED from `peer`: those answers arrived; appends to *send what then fits. Unknown ids are ignored.
  template <typename Ids>
  void received(PeerId peer, const Ids& ids, std::vector<Outgoing>* send, Clock::time_point now = Clock::now()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = peers_.find(peer);
    if (it == peers_.end()) return;
    for (uint64_t id : ids) release(it->second, id);
    pump(it->second, now, send);
  }
  // Answers unacknowledged past the deadline count as received; appends to *send what then fits.
  void expire(Clock::time_point now, std::vector<Outgoing>* send);
  // A new generation (ZPS_RECOVERY): every announced pull and waiting answer is forgotten.
  void clear();

  static constexpr size_t kMaxExpected = 1 << 16;

  // For tests and the server's summary: answers that waited for the window, since the start.
  uint64_t held() const;
  size_t unacknowledgedBytes(PeerId peer) const;

 private:
  struct Sent {
    size_t bytes;
    Clock::time_point at;
  };
  struct Connection {
    uint64_t window = 0;                                       // the latest ordered pull's
    std::unordered_map<uint64_t, int64_t> expected;            // request id -> priority
    std::map<std::pair<int64_t, uint64_t>, Outgoing> waiting;  // (priority, arrival) -> answer
    std::unordered_map<uint64_t, Sent> unacknowledged;         // request id -> its bytes
    size_t unacknowledged_bytes = 0;
  };

  void release(Connection& c, uint64_t request_id);
  // Sends the head of c's waiting answers while they fit. Called with mu_ held.
  void pump(Connection& c, Clock::time_point now, std::vector<Outgoing>* send);

  const Clock::duration deadline_;
  std::atomic<bool> used_{false};  // an ordered pull was announced
  mutable std::mutex mu_;
  std::unordered_map<PeerId, Connection> peers_;
  uint64_t arrivals_ = 0;
  uint64_t held_ = 0;
};

}  // namespace zps
