#include "ps/transport/zmq/io_wait.h"

#include <glog/logging.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace zps {

bool readableNow(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

IoWait::IoWait() {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  CHECK(wake_fd_ >= 0) << "eventfd failed";
}

IoWait::~IoWait() { ::close(wake_fd_); }

void IoWait::wake() {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

IoWait::Ready IoWait::wait(int dealers_fd, int listener_fd, const std::vector<int>& guard_fds, int timeout_ms) {
  fds_.clear();
  fds_.push_back({wake_fd_, POLLIN, 0});
  fds_.push_back({dealers_fd, POLLIN, 0});  // poll() skips negative descriptors
  fds_.push_back({listener_fd, POLLIN, 0});
  for (int fd : guard_fds) fds_.push_back({fd, POLLIN, 0});
  Ready ready;
  int n = ::poll(fds_.data(), fds_.size(), timeout_ms);
  // News that came after the timeout expired, before this thread ran again (milliseconds on a busy
  // host), is signalled, not lost: looked for once more, so that a timeout means none was readable.
  if (n == 0 && timeout_ms > 0) n = ::poll(fds_.data(), fds_.size(), 0);
  ready.timed_out = n == 0 && timeout_ms > 0;
  last_timed_out_ = ready.timed_out;
  if (n <= 0) return ready;  // EINTR: the caller loops
  ready.woken = fds_[0].revents != 0;
  ready.dealers = fds_[1].revents != 0;
  ready.listener = fds_[2].revents != 0;
  for (size_t i = 3; i < fds_.size(); ++i) ready.guard = ready.guard || fds_[i].revents != 0;
  if (ready.woken) {
    uint64_t counter;  // an eventfd's read takes all wake-ups at once
    ssize_t ignored = ::read(wake_fd_, &counter, sizeof(counter));
    (void)ignored;
  }
  return ready;
}

void IoWait::found(int received) {
  if (!last_timed_out_ || received <= 0) return;
  ++late_finds_;
  late_messages_ += static_cast<uint64_t>(received);
}

void IoWait::logLateFinds(const std::string& name) const {
  if (late_finds_ == 0) return;
  LOG(INFO) << name << ": " << late_finds_ << " I/O waits ran to their timeout and then found " << late_messages_
            << " messages on sockets whose descriptor had not signalled (a lost ZMQ_FD edge, up to "
            << "the timeout late, or messages that came the instant before the read)";
}

}  // namespace zps
