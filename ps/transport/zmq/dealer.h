// Dealer: one outgoing connection of the ZeroMQ transport, which several threads send on and one
// thread at a time receives on. Used only by zmq_transport.cc.
//
// Callers' threads send on its socket themselves, one at a time under `mu` (a ZeroMQ socket may
// change threads behind a lock). Who receives what arrives:
// - the transport's I/O thread, which waits on the socket's ZMQ_FD (a plain descriptor) in its epoll
//   set, so that it holds no lock while it waits;
// - or, while a caller waits for its reply there (Transport::receiveOn), that caller, the host: the
//   descriptor then leaves the I/O thread's epoll set, so the reply wakes the caller alone, as in
//   raw ZeroMQ request-reply, instead of the I/O thread and then the caller;
// - or, after the host's wait ended, nobody for a while: the connection stays parked with the thread
//   that hosted it (the descriptor still out of the epoll set, ZMQ_EVENTS not asked), because that
//   thread usually sends its next request and hosts again within microseconds. Whatever arrives
//   meanwhile waits in the socket until the next host receives it, or the connection goes back to
//   the I/O thread: when another thread sends there, when a thread starts waiting for replies that
//   the I/O thread delivers (Transport::beginWaitOnIoThread), or when it stayed parked for
//   kParkedIdle (the I/O thread takes it back). Each of those looks at the socket once before
//   waiting on ZMQ_FD, since the socket may have taken its news in.
//
// Owned by the transport's map of dealers; a sending or receiving thread shares it meanwhile.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace zps {

class Dealer {
 public:
  // How long a connection stays parked before the I/O thread takes it back. Short enough that a
  // reply nobody waits for in receiveOn (an async operation's, a push credit's) is late by a few
  // milliseconds at most; long enough that a caller busy with request after request keeps it.
  static constexpr std::chrono::milliseconds kParkedIdle{2};

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
  // news, a batch left messages waiting, or the connection came back from being parked.
  std::atomic<bool> look{false};

  // With mu held, before a send: a connection parked by another thread goes back to the I/O thread
  // (the sender's reply may come while the parking thread does something else).
  void prepareSend();
  // With mu held, after a send: true when the sending thread receives here before it waits for
  // ZMQ_FD anyway (it is the host, or parked the connection and will host it again), so the send
  // needs no ZMQ_EVENTS check; otherwise the caller asks ZMQ_EVENTS and calls noticeWaiting.
  bool senderReceivesNext() const;

  // The calling thread becomes the one that receives here (the host): the descriptor leaves the I/O
  // thread's set, unless the connection was parked (it is out already). The host receives before it
  // waits. False when the socket is closed or another thread is the host.
  bool host();
  // A thread is inside receiveOn here.
  bool hosted() const { return receiver_.load() == Receiver::kHost; }
  // The I/O thread receives here.
  bool withIoThread() const { return receiver_.load() == Receiver::kIoThread; }
  // Waits until ZMQ_FD is readable, the host is woken (wakeHost), or the deadline; at most 100 ms, so
  // that a lost wake-up costs a delay and never a hang.
  void waitForNews(std::chrono::steady_clock::time_point deadline);
  // Any thread: the host checks again what it waits for (a message another thread received for it, an
  // aborted job, a closed socket).
  void wakeHost();
  // The host is done. With no thread waiting for the I/O thread's deliveries (`io_thread_waiters`
  // read under mu, see Transport::beginWaitOnIoThread) the connection is parked with the calling
  // thread and false is returned; otherwise it goes back to the I/O thread, and true means a
  // message is waiting that ZMQ_FD will not signal: the caller must set `look` and wake the I/O
  // thread.
  bool release(const std::atomic<int>& io_thread_waiters);
  // With mu held: a parked connection goes back to the I/O thread. True when it was parked: the
  // caller must then look at the socket once (receive, or ZMQ_EVENTS) before anyone waits on ZMQ_FD.
  bool unpark();
  // No lock: parked for kParkedIdle or longer at `now`.
  bool parkedIdle(std::chrono::steady_clock::time_point now) const;
  // The I/O thread: takes mu, and unparks when parkedIdle(now). True when it did: the caller then
  // reads the socket until it is empty.
  bool takeBackIfIdle(std::chrono::steady_clock::time_point now);

  // With mu held: closes the socket (ZMQ_LINGER decides what queued sends still go) and wakes the
  // host, if any.
  void close();

 private:
  enum class Receiver { kIoThread, kHost, kParked };
  // Adds the socket's ZMQ_FD to the I/O thread's epoll set; returns epoll_ctl's result.
  int watchFromIoThread();
  void* socket_;
  const int epoll_fd_;
  const uint64_t peer_;
  int fd_ = -1;
  int host_wake_ = -1;                                   // eventfd
  std::atomic<Receiver> receiver_{Receiver::kIoThread};  // written with mu held
  std::thread::id host_thread_;                          // with mu: the host, or the thread that parked
  std::atomic<int64_t> parked_at_ns_{0};                 // steady_clock, written with mu held
};

}  // namespace zps
