// CreditGauge: sizes a worker's push credit per server (priority scheduling with ZPS_CREDIT_BYTES=auto)
// from the worker's own traffic, as the job runs.
//
// Why: one partition in flight per server keeps the workers' flows into a server even, which is what
// made the emulated cluster fast (docs/performance.md#defaults), but a link with a long round trip
// needs more bytes in flight than that to stay busy: its bandwidth-delay product. The gauge measures
// both from the acknowledgements of the scheduled pushes: the delivery rate is the most push bytes
// acknowledged in any 50 ms of the last second, the round trip the shortest time from a push's send
// to its acknowledgement in the last 10 s (the acknowledgement of a push that found no queue). The
// credit is twice rate x round trip, which lets the rate grow when the link has room (a credit that
// only matched what it measured could never measure more), spread over the servers, never below the
// floor (one partition) and never above the ceiling. Where the links have no delay, the round trip is
// about two partitions' time on the wire, and the credit stays at one partition.
//
// Owned by the PushScheduler, which calls it under its lock; not thread-safe on its own.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace zps {

class CreditGauge {
 public:
  using Clock = std::chrono::steady_clock;

  CreditGauge(size_t floor_bytes, size_t ceiling_bytes, int servers);

  // A push that held `bytes` of credit, sent at `sent`, was acknowledged at `now`. Returns the credit
  // per server from now on.
  size_t acknowledged(size_t bytes, Clock::time_point sent, Clock::time_point now);
  size_t credit() const { return credit_; }
  // What it measured, for the log: bytes per second and the shortest round trip (0 before any).
  double rateBytesPerSecond() const;
  Clock::duration minRoundTrip() const;

 private:
  static constexpr auto kBin = std::chrono::milliseconds(50);
  static constexpr size_t kBins = 20;  // a second of delivery bins
  static constexpr auto kRoundTripWindow = std::chrono::seconds(10);

  void advanceBins(Clock::time_point now);

  const size_t floor_;
  const size_t ceiling_;
  const int servers_;
  size_t credit_;
  // Bytes acknowledged per 50 ms bin, the newest at bin_index_ (a ring).
  std::array<uint64_t, kBins> bins_{};
  size_t bin_index_ = 0;
  Clock::time_point bin_start_{};
  bool started_ = false;
  // The shortest round trip of the current window and of the one before it: the minimum of both is
  // at most 10 s old, and a longer path (a route or load change) replaces a short one in time.
  Clock::duration min_current_ = Clock::duration::max();
  Clock::duration min_previous_ = Clock::duration::max();
  Clock::time_point window_start_{};
};

}  // namespace zps
