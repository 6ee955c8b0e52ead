// Dealer: one outgoing connection of the ZeroMQ transport, which several threads send on and one
// thread at a time receives on. Used only by zmq_transport.cc.
//
// Callers' threads send on its socket themselves, one at a time under `mu` (a ZeroMQ socket may
// change threads behind a lock). What arrives is received by the transport's I/O thread, which waits
// on the socket's ZMQ_FD (a plain descriptor) in its epoll set, so that it holds no lock while it
// waits; or, while a caller waits for its reply there (Transport::receiveOn), by that caller: the
// descriptor then leaves the I/O thread's epoll set, so the reply wakes the caller alone, as in raw
// ZeroMQ request-reply, instead of the I/O thread and then the caller.
//
// Owned by the transport's map of dealers; a sending or receiving thread shares it meanwhile.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace zps {

class Dealer {
 public:
  // Takes `socket` (a connecting DEALER) and watches its ZMQ_FD in `epoll_fd` (the I/O thread's set,
  // which outlives the socket: close() removes it) with `peer` as the event's data.
  Dealer(void* socket, int epoll_fd, uint64_t peer);
  ~Dealer();
  Dealer(const Dealer&) = delete;
  Dealer& operator=(const Dealer&) = delete;

  std::mutex mu;  // held to use socket()
  // Null once closed. With mu held.
  void* socket() const { return socket_; }
  // Takes mu.
  bool closed() {
    std::lock_guard<std::mutex> lock(mu);
    return socket_ == nullptr;
  }
  // ZMQ_FD: readable when the socket may have news. Fixed for the dealer's life (a closed socket's
  // descriptor may be closed too: whoever waits on it also waits on the host's wake-up).
  int fd() const { return fd_; }

  // With mu held, after a send or receive found a message waiting (ZMQ_EVENTS): ZMQ_FD stays quiet
  // about it now, so whoever receives here must look without waiting for it: the host is woken, or
  // else `look` is set and the caller wakes the I/O thread.
  void noticeWaiting();
  // Set when the I/O thread must look at the socket without waiting for ZMQ_FD: a send took in its
  // news, or a batch left messages waiting.
  std::atomic<bool> look{false};

  // The calling thread becomes the one that receives here (the host): the descriptor leaves the I/O
  // thread's set. False when the socket is closed or another thread is the host.
  bool host();
  bool hosted() const { return hosted_.load(); }
  // Waits until ZMQ_FD is readable, the host is woken (wakeHost), or the deadline; at most 100 ms, so
  // that a lost wake-up costs a delay and never a hang.
  void waitForNews(std::chrono::steady_clock::time_point deadline);
  // Any thread: the host checks again what it waits for (a message another thread received for it, an
  // aborted job, a closed socket).
  void wakeHost();
  // The host is done: the descriptor goes back into the I/O thread's set. True when a message is
  // waiting that ZMQ_FD will not signal: the caller must set `look` and wake the I/O thread.
  bool release();

  // With mu held: closes the socket (ZMQ_LINGER decides what queued sends still go) and wakes the
  // host, if any.
  void close();

 private:
  // Adds the socket's ZMQ_FD to the I/O thread's epoll set; returns epoll_ctl's result.
  int watchFromIoThread();
  void* socket_;
  const int epoll_fd_;
  const uint64_t peer_;
  int fd_ = -1;
  int host_wake_ = -1;               // eventfd
  std::atomic<bool> hosted_{false};  // written with mu held
};

}  // namespace zps
