// ZeroMQ transport: one ROUTER socket for incoming connections (when listen() was called) and one DEALER
// socket per outgoing connection, all owned by a single I/O thread. Other threads hand it work through a
// command queue and a wake-up that its wait watches (io_wait.h), because ZeroMQ sockets must not be
// used from two threads at once. The exceptions are outgoing connections (see dealer.h): a caller's thread sends there
// itself, under the connection's lock, which saves waking the I/O thread per request, and a caller
// waiting for its reply may receive there itself (receiveOn), which saves a wake-up per reply.
//
// Zero copy (zmq_frames.h): a sent Blob becomes a zmq_msg_t that points at the Blob's bytes and holds a
// reference to its owner until ZeroMQ frees it; a received zmq_msg_t becomes the owner of the Blob
// handed to recv(). Between processes on one host, large frames cross in shared memory instead
// (shared_memory_links.h): the socket then carries where they lie.
//
// Private to ps/transport/zmq: zmq_transport.cc holds what callers' threads do (the Transport verbs),
// zmq_io_thread.cc what the I/O thread does (commands, sockets, receiving).
#pragma once

#include <arpa/inet.h>
#include <glog/logging.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_set>
#include <variant>

#include "ps/common/bounded_queue.h"
#include "ps/common/log_limiter.h"
#include "ps/transport/transport.h"
#include "ps/transport/zmq/dealer.h"
#include "ps/transport/zmq/handshake_guard.h"
#include "ps/transport/zmq/incoming_peers.h"
#include "ps/transport/zmq/io_commands.h"
#include "ps/transport/zmq/io_wait.h"
#include "ps/transport/zmq/shared_memory_links.h"
#include "ps/transport/zmq/zmq_frames.h"

namespace zps::zmq_transport {

using namespace zmq_io;  // NOLINT: the I/O thread's commands

// Messages with more frames than this are drained and dropped here; the codec allows far fewer.
constexpr size_t kMaxFramesPerMessage = 16;
// Upper bound of messages taken from one socket per poll round, so one busy peer cannot starve the rest.
constexpr int kRecvBatch = 64;
// The I/O thread's wait when nothing is due; a wait that times out looks at every socket.
constexpr std::chrono::milliseconds kIdleWait{100};

inline std::string zmqError() { return zmq_strerror(zmq_errno()); }

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(const TransportOptions& options);

  ~ZmqTransport() override { close(); }

  StatusOr<int> listen(const std::string& host, int port) override;

  StatusOr<PeerId> connect(const Endpoint& to) override;

  StatusOr<PeerId> connectEndpoint(const std::string& endpoint, const std::string& password);

  Status send(PeerId peer, std::vector<Blob> frames) override;

  // The frames as given, past the shared-memory links.
  Status sendAsIs(PeerId peer, std::vector<Blob> frames);

  StatusOr<TransportMessage> recv(std::chrono::steady_clock::time_point deadline) override;

  void onMessage(std::function<void(TransportMessage)> handler) override { enqueue(HandlerCmd{std::move(handler)}); }

  void close() override;

  void forget(PeerId peer) override { enqueue(ForgetCmd{peer}); }

  void onReconnect(std::function<void(PeerId)> handler) override { enqueue(ReconnectHandlerCmd{std::move(handler)}); }

  void disconnect(PeerId peer) override { enqueue(DisconnectCmd{peer}); }

  uint64_t reconnects() const override { return reconnects_.load(); }

  bool receiveOn(PeerId peer, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& done) override;

  void beginWaitOnIoThread() override;

  void endWaitOnIoThread() override { io_thread_waiters_.fetch_sub(1); }

  void wakeReceivers() override;

  std::string handshakeFailure(PeerId peer) const override { return guard_->clientFailure(peer); }

  uint64_t refusedHandshakes() const override { return guard_->refused(); }

  uint64_t droppedReplies() const override { return dropped_replies_.load(); }

  std::string describe(PeerId peer) const override;

 private:
  static HandshakeCredentials credentialsOf(const TransportOptions& o);

  void enqueue(Command cmd);

  void wake() { io_wait_.wake(); }

  // Sends at once, on this thread, when that overtakes no queued send:
  // on the I/O thread itself (a server's reply from its handler), or to an outgoing connection (a
  // worker's request). Each saves a wake-up of the I/O thread; on loopback that is a good part of a
  // small message's round trip. False: the message must go through the queue.
  bool sendWithoutHandOff(PeerId peer, const std::vector<Blob>& frames);

  std::shared_ptr<Dealer> dealerOf(PeerId peer);

  // With the dealer's lock held. A send may take in the socket's news (a reply that arrived, a
  // connection's pipe to read from), after which ZMQ_FD stays quiet about it: ZMQ_EVENTS tells, and
  // the dealer passes it on to whoever receives there.
  // No check when the sending thread receives there next anyway (the host, or the thread that
  // parked the connection): its receive takes the news in before it waits.
  bool sendOnDealer(Dealer& dealer, const std::vector<Blob>& frames);

  void doListen(ListenCmd& cmd);

  void doConnect(const ConnectCmd& cmd);

  void sendNow(const SendCmd& cmd);

  void doForget(PeerId peer);

  void doDisconnect(PeerId peer);

  void setHandler(std::function<void(TransportMessage)> handler);

  // Receives one multi-part message from `socket` (a dealer's under its lock, released before the
  // message is handled), on the I/O thread or a dealer's host; returns false when none is waiting.
  bool receiveOne(void* socket, bool is_router, PeerId dealer_peer, Dealer* dealer = nullptr);

  // The I/O thread waits on plain descriptors only (io_wait.h). Dealers are watched through their
  // ZMQ_FD (in the epoll set dealer_fds_, except while a caller receives there), the listener and the
  // handshake guard's sockets through theirs. A ZMQ_FD only says "look at the socket": once the socket
  // took its news in (by a receive here, or a send, which then sets `look` or listener_look_), it stays
  // quiet until the next news, so each socket is read until it has no message left or is looked at
  // again without waiting. A wait that times out looks at every socket, so that a lost signal costs
  // a delay (at most 100 ms while idle), never a hang. While a caller hosts or parked a dealer, the
  // wait is short, so that a dealer parked for Dealer::kParkedIdle comes back (dealer.h).
  void ioLoop();

  // On the I/O thread: connections parked for Dealer::kParkedIdle come back, read at once (expected: no late find).
  void takeBackIdleDealers();

  // On the I/O thread: a batch of the dealer's messages when signalled (`ready`, its `look`) or swept, unless a
  // caller hosts or parked it; returns how many only the sweep found. Wakes a host that came meanwhile.
  int receiveFromDealer(PeerId peer, Dealer& dealer, bool ready, bool sweep = false);

  // On the I/O thread: a batch of the listener's messages; returns how many came without being `signalled`. The
  // receive that finds none takes in all news (a reply sent meanwhile may have), after which router_fd_ signals.
  int receiveFromListener(bool signalled);

  const TransportOptions options_;
  void* ctx_ = nullptr;
  IoWait io_wait_;
  int dealer_fds_ = -1;  // epoll: the ZMQ_FD of each dealer that no caller receives on
  std::thread io_thread_;
  std::atomic<bool> closed_{false};
  BoundedQueue<TransportMessage> recv_queue_;
  shm::SharedMemoryLinks links_;

  std::mutex cmd_mu_;
  std::deque<Command> commands_;

  mutable std::mutex names_mu_;  // guards next_peer_ and names_, read by describe() on any thread
  PeerId next_peer_ = 1;
  std::map<PeerId, std::string> names_;

  // Owned by the I/O thread, except the thread-safe getters handshakeFailure() and refusedHandshakes().
  std::unique_ptr<HandshakeGuard> guard_;
  LogLimiter send_failure_log_;
  void* router_ = nullptr;
  int router_fd_ = -1;          // its ZMQ_FD
  bool listener_look_ = false;  // look at router_ without waiting for router_fd_
  // Written by the I/O thread under dealers_mu_; read by it freely and by sending threads under the lock.
  std::mutex dealers_mu_;
  std::map<PeerId, std::shared_ptr<Dealer>> dealers_;
  std::atomic<int64_t> queued_sends_{0};  // SendCmds queued and not yet sent: no send may overtake them
  IncomingPeers incoming_;
  std::random_device routing_id_rng_;
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<uint64_t> dropped_replies_{0};  // to incoming peers whose queue was full
  std::function<void(PeerId)> reconnect_handler_;
  std::function<void(TransportMessage)> handler_;  // set: incoming messages go here, not to recv_queue_
  std::atomic<bool> handler_ready_{false};         // handler_ is set, for receiveOn's threads
  std::atomic<int> io_thread_waiters_{0};          // threads between begin- and endWaitOnIoThread
  std::atomic<bool> io_waits_long_{false};         // the I/O thread may be in a kIdleWait wait
};

}  // namespace zps::zmq_transport
