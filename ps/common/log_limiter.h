// LogLimiter: lets at most `burst` log lines through per `window`, and counts the rest, so that a peer
// that repeats a refused request a million times costs a few log lines, not a full disk. The caller
// logs when allow() says so and adds suppressed() ("and N more like it") to the line.
//
// Not thread-safe: each owner (a role's logic thread, a transport's I/O thread) has its own.
#pragma once

#include <chrono>
#include <cstdint>

namespace zps {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LogLimiter(int burst = 10, std::chrono::seconds window = std::chrono::seconds(60))
      : burst_(burst), window_(window) {}

  // True when this event may be logged. Resets suppressed() after a line was allowed.
  bool allow(Clock::time_point now = Clock::now()) {
    if (now - window_start_ >= window_) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++suppressed_;
      return false;
    }
    ++in_window_;
    last_suppressed_ = suppressed_;
    suppressed_ = 0;
    return true;
  }

  // How many events were not logged before the line allow() just let through.
  uint64_t suppressed() const { return last_suppressed_; }

 private:
  int burst_;
  Clock::duration window_;
  Clock::time_point window_start_{};
  int in_window_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t last_suppressed_ = 0;
};

}  // namespace zps
