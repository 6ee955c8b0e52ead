#include "ps/transport/zmq/dealer.h"

#include <glog/logging.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstring>

#include "ps/transport/zmq/zmq_frames.h"

namespace zps {
namespace {

// The longest a host waits without looking again (see waitForNews).
constexpr std::chrono::milliseconds kHostWaitSlice{100};

}  // namespace

Dealer::Dealer(void* socket, int epoll_fd, uint64_t peer) : socket_(socket), epoll_fd_(epoll_fd), peer_(peer) {
  size_t fd_len = sizeof(fd_);
  CHECK(zmq_getsockopt(socket_, ZMQ_FD, &fd_, &fd_len) == 0) << "ZMQ_FD: " << zmq_strerror(zmq_errno());
  host_wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  CHECK(host_wake_ >= 0) << "eventfd failed";
  CHECK(watchFromIoThread() == 0) << "epoll_ctl: " << strerror(errno);
}

int Dealer::watchFromIoThread() {
  epoll_event watch{};
  watch.events = EPOLLIN;
  watch.data.u64 = peer_;
  return epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd_, &watch);
}

Dealer::~Dealer() { ::close(host_wake_); }

void Dealer::noticeWaiting() {
  if (hosted())
    wakeHost();
  else
    look = true;
}

void Dealer::prepareSend() {
  if (receiver_.load() == Receiver::kParked && host_thread_ != std::this_thread::get_id()) unpark();
}

bool Dealer::senderReceivesNext() const {
  return receiver_.load() != Receiver::kIoThread && host_thread_ == std::this_thread::get_id();
}

bool Dealer::host() {
  std::lock_guard<std::mutex> lock(mu);
  if (socket_ == nullptr || hosted()) return false;
  if (withIoThread()) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
  receiver_ = Receiver::kHost;
  host_thread_ = std::this_thread::get_id();
  return true;
}

void Dealer::waitForNews(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  const auto wait = std::clamp(left, std::chrono::milliseconds(0), kHostWaitSlice);
  pollfd fds[2] = {{fd_, POLLIN, 0}, {host_wake_, POLLIN, 0}};
  if (::poll(fds, 2, static_cast<int>(wait.count())) <= 0 || fds[1].revents == 0) return;
  uint64_t counter;
  ssize_t ignored = ::read(host_wake_, &counter, sizeof(counter));
  (void)ignored;
}

void Dealer::wakeHost() {
  uint64_t one = 1;
  ssize_t ignored = ::write(host_wake_, &one, sizeof(one));
  (void)ignored;
}

bool Dealer::release(const std::atomic<int>& io_thread_waiters) {
  std::lock_guard<std::mutex> lock(mu);
  if (socket_ == nullptr) {
    receiver_ = Receiver::kIoThread;  // closed: nobody receives any more
    return false;
  }
  if (io_thread_waiters.load() == 0) {
    parked_at_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
    receiver_ = Receiver::kParked;
    return false;
  }
  receiver_ = Receiver::kIoThread;
  watchFromIoThread();
  // Whatever arrived after the host's last receive and before the descriptor was back in the set has
  // been taken in by now: ZMQ_FD will not say so.
  return hasInput(socket_);
}

bool Dealer::unpark() {
  if (socket_ == nullptr || receiver_.load() != Receiver::kParked) return false;
  receiver_ = Receiver::kIoThread;
  watchFromIoThread();
  return true;
}

bool Dealer::parkedIdle(std::chrono::steady_clock::time_point now) const {
  if (receiver_.load() != Receiver::kParked) return false;
  const std::chrono::steady_clock::duration parked(parked_at_ns_.load());
  return now.time_since_epoch() - parked >= kParkedIdle;
}

bool Dealer::takeBackIfIdle(std::chrono::steady_clock::time_point now) {
  if (!parkedIdle(now)) return false;
  std::lock_guard<std::mutex> lock(mu);
  return parkedIdle(now) && unpark();
}

void Dealer::close() {
  if (socket_ == nullptr) return;
  if (withIoThread()) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd_, nullptr);
  zmq_close(socket_);
  socket_ = nullptr;
  if (hosted()) wakeHost();
  if (receiver_.load() == Receiver::kParked) receiver_ = Receiver::kIoThread;  // closed: nobody receives
}

}  // namespace zps
