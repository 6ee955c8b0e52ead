// IoWait: how the ZeroMQ transport's I/O thread sleeps, and how other threads wake it. It waits with
// one poll() on plain descriptors: its own wake-up (an eventfd), the dealers' epoll set, and the
// ZMQ_FD of the listener and of the handshake guard's sockets. zmq_poll on the sockets themselves
// would ask each for ZMQ_EVENTS before and after the wait (a poll and a getpid each), which on
// loopback was a good part of a small message's round trip.
//
// A ZMQ_FD only says "look at the socket": it becomes readable when the socket has news, and stays
// quiet once the socket has taken that news in, whichever call did (a receive, a send, ZMQ_EVENTS).
// So whoever uses such a socket reads it until no message is left (the receive that finds none takes
// in all news), and looks again without waiting after sending on it.
//
// Owned by the ZmqTransport; wake() is called from any thread, wait() from the I/O thread only.
#pragma once

#include <poll.h>

#include <cstdint>
#include <string>
#include <vector>

namespace zps {

// Whether `fd` is readable now (a poll() that does not wait).
bool readableNow(int fd);

class IoWait {
 public:
  IoWait();
  ~IoWait();
  IoWait(const IoWait&) = delete;
  IoWait& operator=(const IoWait&) = delete;

  // Any thread: the next (or current) wait() returns at once.
  void wake();

  // Which descriptors were readable (wake-ups are consumed).
  struct Ready {
    bool woken = false;
    bool dealers = false;
    bool listener = false;
    bool guard = false;      // any of guard_fds
    bool timed_out = false;  // none was, within a timeout_ms above 0, nor right after it
  };
  // Waits until a descriptor is readable, wake() or timeout_ms (0: only looks). A descriptor of -1 is
  // not watched.
  Ready wait(int dealers_fd, int listener_fd, const std::vector<int>& guard_fds, int timeout_ms);

  // After each wait: how many messages the I/O thread then found on sockets that nothing had signalled
  // (no readable descriptor right before the read, no flag set by a send), when it looked at every
  // socket because the wait ran to its timeout. Such messages slept although they were there (a lost
  // ZMQ_FD edge), up to the timeout (100 ms while idle); but a message that arrives between that last
  // look and the read counts too, and so does every message the same read then takes, so on a busy
  // host the count is an upper bound. Logged when the I/O thread ends (only when it happened).
  void found(int received);
  void logLateFinds(const std::string& name) const;
  uint64_t lateFinds() const { return late_finds_; }

 private:
  int wake_fd_ = -1;  // eventfd
  bool last_timed_out_ = false;
  uint64_t late_finds_ = 0;     // waits that timed out with messages waiting
  uint64_t late_messages_ = 0;  // the messages they found
  std::vector<pollfd> fds_;
};

}  // namespace zps
