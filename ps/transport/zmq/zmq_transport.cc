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

namespace zps {
namespace {

using namespace zmq_io;  // NOLINT: the I/O thread's commands

// Messages with more frames than this are drained and dropped here; the codec allows far fewer.
constexpr size_t kMaxFramesPerMessage = 16;
// Upper bound of messages taken from one socket per poll round, so one busy peer cannot starve the rest.
constexpr int kRecvBatch = 64;
// The I/O thread's wait when nothing is due; a wait that times out looks at every socket.
constexpr std::chrono::milliseconds kIdleWait{100};

std::string zmqError() { return zmq_strerror(zmq_errno()); }

class ZmqTransport final : public Transport {
 public:
  explicit ZmqTransport(const TransportOptions& options)
      : options_(options),
        recv_queue_(options.recv_queue_capacity),
        links_(options.name, !options.faults.any()),
        fault_rng_(options.faults.seed) {
    keepFreedMessageMemory();
    ctx_ = zmq_ctx_new();
    CHECK(ctx_ != nullptr) << "zmq_ctx_new: " << zmqError();
    zmq_ctx_set(ctx_, ZMQ_MAX_SOCKETS, 65536);
    guard_ = std::make_unique<HandshakeGuard>(ctx_, options_.name, credentialsOf(options_));
    guard_->onClientReconnect([this](uint64_t peer) {
      ++reconnects_;
      links_.reconnected(peer);
      if (reconnect_handler_) reconnect_handler_(peer);
    });
    dealer_fds_ = epoll_create1(EPOLL_CLOEXEC);
    CHECK(dealer_fds_ >= 0) << "epoll_create1 failed";
    io_thread_ = std::thread([this] { ioLoop(); });
  }

  ~ZmqTransport() override { close(); }

  StatusOr<int> listen(const std::string& host, int port) override {
    auto promise = std::make_shared<std::promise<StatusOr<int>>>();
    auto future = promise->get_future();
    enqueue(ListenCmd{host, port, promise});
    if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      return DeadlineExceeded(options_.name + ": I/O thread did not bind " + host + ":" + std::to_string(port) +
                              " within 30 s");
    return future.get();
  }

  StatusOr<PeerId> connect(const std::string& host, int port) override { return connectWithPassword(host, port, ""); }

  StatusOr<PeerId> connectWithPassword(const std::string& host, int port, const std::string& password) override {
    in6_addr buf6;
    in_addr buf4;
    if (inet_pton(AF_INET, host.c_str(), &buf4) != 1 && inet_pton(AF_INET6, host.c_str(), &buf6) != 1)
      return InvalidArgument("connect needs an IP address, got '" + host + "' (resolve names first)");
    if (port <= 0 || port > 65535) return InvalidArgument("port " + std::to_string(port) + " is out of range");
    std::string endpoint = host.find(':') != std::string::npos ? "tcp://[" + host + "]:" + std::to_string(port)
                                                               : "tcp://" + host + ":" + std::to_string(port);
    return connectEndpoint(endpoint, password);
  }

  StatusOr<PeerId> connectIpc(const std::string& name) override { return connectIpcWithPassword(name, ""); }

  StatusOr<PeerId> connectIpcWithPassword(const std::string& name, const std::string& password) override {
    if (name.empty() || name.size() > 64 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      return InvalidArgument("'" + name + "' is not an ipc socket name");
    StatusOr<PeerId> peer = connectEndpoint("ipc://@" + name, password);
    if (peer.ok()) links_.offerTo(*peer);  // the peer is on this host
    return peer;
  }

  StatusOr<PeerId> connectEndpoint(const std::string& endpoint, const std::string& password) {
    PeerId id;
    {
      std::lock_guard<std::mutex> lock(names_mu_);
      id = next_peer_++;
      names_[id] = endpoint;
    }
    enqueue(ConnectCmd{id, endpoint, password});
    return id;
  }

  Status send(PeerId peer, std::vector<Blob> frames) override {
    if (frames.empty()) return InvalidArgument("cannot send a message with no frames");
    return sendAsIs(peer, links_.outgoing(peer, std::move(frames)));
  }

  // The frames as given, past the shared-memory links.
  Status sendAsIs(PeerId peer, std::vector<Blob> frames) {
    if (closed_.load()) return Aborted(options_.name + " is closed");
    if (sendWithoutHandOff(peer, frames)) return Status::OK();
    queued_sends_.fetch_add(1);
    enqueue(SendCmd{peer, std::move(frames)});
    return Status::OK();
  }

  StatusOr<TransportMessage> recv(std::chrono::steady_clock::time_point deadline) override {
    auto msg = recv_queue_.pop(deadline);
    if (!msg) {
      if (closed_.load()) return Aborted(options_.name + " is closed");
      return DeadlineExceeded(options_.name + ": no message before the deadline");
    }
    return std::move(*msg);
  }

  void onMessage(std::function<void(TransportMessage)> handler) override { enqueue(HandlerCmd{std::move(handler)}); }

  void close() override {
    if (closed_.exchange(true)) return;
    enqueue(StopCmd{});
    if (io_thread_.joinable()) io_thread_.join();
    recv_queue_.close();
    ::close(dealer_fds_);
    zmq_ctx_term(ctx_);
  }

  void forget(PeerId peer) override { enqueue(ForgetCmd{peer}); }

  void onReconnect(std::function<void(PeerId)> handler) override { enqueue(ReconnectHandlerCmd{std::move(handler)}); }

  void disconnect(PeerId peer) override { enqueue(DisconnectCmd{peer}); }

  uint64_t reconnects() const override { return reconnects_.load(); }

  bool receiveOn(PeerId peer, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& done) override {
    if (!handler_ready_.load() || closed_.load() || std::this_thread::get_id() == io_thread_.get_id()) return false;
    std::shared_ptr<Dealer> dealer = dealerOf(peer);
    if (dealer == nullptr || !dealer->host()) return false;
    // An I/O thread in its long wait would not notice when this connection gets parked.
    if (io_waits_long_.load()) wake();
    while (!done()) {
      if (receiveOne(nullptr, false, peer, dealer.get())) continue;
      if (std::chrono::steady_clock::now() >= deadline || closed_.load() || dealer->closed()) break;
      dealer->waitForNews(deadline);
    }
    if (dealer->release(io_thread_waiters_)) {
      dealer->look = true;
      wake();
    }
    return true;
  }

  void beginWaitOnIoThread() override {
    io_thread_waiters_.fetch_add(1);
    std::lock_guard<std::mutex> lock(dealers_mu_);
    for (auto& [id, d] : dealers_) {
      std::lock_guard<std::mutex> hold(d->mu);
      if (d->unpark() && hasInput(d->socket())) {
        d->look = true;
        wake();
      }
    }
  }

  void endWaitOnIoThread() override { io_thread_waiters_.fetch_sub(1); }

  void wakeReceivers() override {
    std::lock_guard<std::mutex> lock(dealers_mu_);
    for (auto& [id, d] : dealers_) {
      if (d->hosted()) d->wakeHost();
    }
  }

  std::string handshakeFailure(PeerId peer) const override { return guard_->clientFailure(peer); }

  uint64_t refusedHandshakes() const override { return guard_->refused(); }

  uint64_t droppedReplies() const override { return dropped_replies_.load(); }

  std::string describe(PeerId peer) const override {
    std::lock_guard<std::mutex> lock(names_mu_);
    auto it = names_.find(peer);
    return it == names_.end() ? "peer #" + std::to_string(peer) : it->second;
  }

 private:
  static HandshakeCredentials credentialsOf(const TransportOptions& o) {
    return {o.handshake_password,  o.curve_server_secret, o.curve_server_public,
            o.curve_client_public, o.curve_client_secret, o.credential_name};
  }

  void enqueue(Command cmd) {
    {
      std::lock_guard<std::mutex> lock(cmd_mu_);
      commands_.push_back(std::move(cmd));
    }
    wake();
  }

  void wake() { io_wait_.wake(); }

  // Sends at once, on this thread, when that overtakes no queued send and no fault is to be injected:
  // on the I/O thread itself (a server's reply from its handler), or to an outgoing connection (a
  // worker's request). Each saves a wake-up of the I/O thread; on loopback that is a good part of a
  // small message's round trip. False: the message must go through the queue.
  bool sendWithoutHandOff(PeerId peer, const std::vector<Blob>& frames) {
    if (options_.faults.any() || queued_sends_.load() != 0) return false;
    if (std::this_thread::get_id() == io_thread_.get_id()) {
      sendNow(SendCmd{peer, frames});
      return true;
    }
    std::shared_ptr<Dealer> dealer = dealerOf(peer);
    if (dealer == nullptr) return false;
    std::lock_guard<std::mutex> lock(dealer->mu);
    if (dealer->socket() == nullptr) return false;
    if (!sendOnDealer(*dealer, frames)) {
      LOG_EVERY_N(WARNING, 100) << options_.name << ": send to " << describe(peer) << " failed: " << zmqError();
    }
    if (dealer->look) wake();
    return true;
  }

  std::shared_ptr<Dealer> dealerOf(PeerId peer) {
    std::lock_guard<std::mutex> lock(dealers_mu_);
    auto it = dealers_.find(peer);
    return it == dealers_.end() ? nullptr : it->second;
  }

  // With the dealer's lock held. A send may take in the socket's news (a reply that arrived, a
  // connection's pipe to read from), after which ZMQ_FD stays quiet about it: ZMQ_EVENTS tells, and
  // the dealer passes it on to whoever receives there.
  // No check when the sending thread receives there next anyway (the host, or the thread that
  // parked the connection): its receive takes the news in before it waits.
  bool sendOnDealer(Dealer& dealer, const std::vector<Blob>& frames) {
    dealer.prepareSend();
    const bool ok = sendFrames(dealer.socket(), nullptr, frames);
    if (!dealer.senderReceivesNext() && hasInput(dealer.socket())) dealer.noticeWaiting();
    return ok;
  }

  void doListen(ListenCmd& cmd) {
    if (router_ != nullptr) {
      cmd.done->set_value(FailedPrecondition(options_.name + " is already listening"));
      return;
    }
    void* s = zmq_socket(ctx_, ZMQ_ROUTER);
    setCommonOptions(s, options_);
    if (options_.max_queued_replies > 0)
      zmq_setsockopt(s, ZMQ_SNDHWM, &options_.max_queued_replies, sizeof(options_.max_queued_replies));
    if (Status guarded = guard_->prepareListener(s); !guarded.ok()) {
      zmq_close(s);
      cmd.done->set_value(guarded);
      return;
    }
    int mandatory = 1;  // an unroutable reply is an error we log, not a silent drop
    zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &mandatory, sizeof(mandatory));
    // A peer that reconnects after a reset presents its routing id again; it takes over the old
    // connection, which this side may not have seen die yet (a half-open connection), and keeps its
    // PeerId, so what the role bound to it (a HELLO's worker rank, a member's rank) stays bound.
    int handover = 1;
    zmq_setsockopt(s, ZMQ_ROUTER_HANDOVER, &handover, sizeof(handover));
    std::string host = cmd.host.empty() ? "0.0.0.0" : cmd.host;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    std::string endpoint = "tcp://" + host + ":" + (cmd.port == 0 ? std::string("*") : std::to_string(cmd.port));
    if (zmq_bind(s, endpoint.c_str()) != 0) {
      std::string err = zmqError();
      zmq_close(s);
      cmd.done->set_value(Unavailable("cannot listen on " + endpoint + ": " + err));
      return;
    }
    char last[256] = {0};
    size_t len = sizeof(last) - 1;
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, last, &len);
    std::string bound(last);
    int port = std::atoi(bound.substr(bound.rfind(':') + 1).c_str());
    if (!options_.ipc_name.empty() && zmq_bind(s, ("ipc://@" + options_.ipc_name).c_str()) != 0)
      LOG(WARNING) << options_.name << ": cannot listen on ipc://@" << options_.ipc_name << " (" << zmqError()
                   << "); same-host peers use TCP";
    router_ = s;
    size_t fd_len = sizeof(router_fd_);
    CHECK(zmq_getsockopt(s, ZMQ_FD, &router_fd_, &fd_len) == 0) << "ZMQ_FD: " << zmqError();
    VLOG(1) << options_.name << ": listening on " << bound;
    cmd.done->set_value(port);
  }

  void doConnect(const ConnectCmd& cmd) {
    void* s = zmq_socket(ctx_, ZMQ_DEALER);
    setCommonOptions(s, options_);
    guard_->prepareClient(s, cmd.id, cmd.endpoint, cmd.password);
    setClientOptions(s, routing_id_rng_);
    if (zmq_connect(s, cmd.endpoint.c_str()) != 0) {
      LOG(ERROR) << options_.name << ": cannot connect to " << cmd.endpoint << ": " << zmqError();
      guard_->forgetClient(cmd.id);
      zmq_close(s);
      return;
    }
    VLOG(1) << options_.name << ": connecting to " << cmd.endpoint;
    auto dealer = std::make_shared<Dealer>(s, dealer_fds_, cmd.id);
    std::lock_guard<std::mutex> lock(dealers_mu_);
    dealers_[cmd.id] = std::move(dealer);
  }

  void doSend(SendCmd& cmd) {
    if (options_.faults.any()) {
      double roll = std::uniform_real_distribution<double>(0, 1)(fault_rng_);
      const FaultInjection& f = options_.faults;
      if (roll < f.drop) {
        ++faults_injected_;
        return;
      }
      if (roll < f.drop + f.duplicate) {
        ++faults_injected_;
        sendNow(cmd);
      } else if (roll < f.drop + f.duplicate + f.delay) {
        ++faults_injected_;
        delayed_.emplace_back(std::chrono::steady_clock::now() + std::chrono::milliseconds(f.delay_ms), std::move(cmd));
        return;
      }
    }
    sendNow(cmd);
  }

  void sendNow(const SendCmd& cmd) {
    bool ok = true;
    if (auto it = dealers_.find(cmd.peer); it != dealers_.end()) {
      std::lock_guard<std::mutex> lock(it->second->mu);
      ok = sendOnDealer(*it->second, cmd.frames);
    } else if (const std::string* routing_id = incoming_.routingIdOf(cmd.peer); routing_id && router_) {
      ok = sendFrames(router_, routing_id, cmd.frames);
      if (!ok && zmq_errno() == EAGAIN) dropped_replies_.fetch_add(1);  // the peer's queue is full
      listener_look_ = true;  // the send may have taken in the listener's news
    } else {
      LOG_EVERY_N(WARNING, 100) << options_.name << ": dropping a message to unknown peer #" << cmd.peer;
      return;
    }
    if (!ok && send_failure_log_.allow()) {
      LOG(WARNING) << options_.name << ": send to " << describe(cmd.peer) << " failed: " << zmqError()
                   << " (a peer that does not read its replies loses them; " << send_failure_log_.suppressed()
                   << " failures before this one not logged)";
    }
  }

  void doForget(PeerId peer) {
    links_.forget(peer);
    std::optional<PeerId> gone = incoming_.forget(peer);
    if (!gone) return;
    std::lock_guard<std::mutex> lock(names_mu_);
    names_.erase(*gone);
  }

  void doDisconnect(PeerId peer) {
    auto it = dealers_.find(peer);
    if (it == dealers_.end()) return;
    links_.forget(peer);
    guard_->forgetClient(peer);
    {
      std::lock_guard<std::mutex> closing(it->second->mu);  // a sending thread may hold it
      int no_linger = 0;
      zmq_setsockopt(it->second->socket(), ZMQ_LINGER, &no_linger, sizeof(no_linger));
      it->second->close();
    }
    std::lock_guard<std::mutex> lock(dealers_mu_);
    dealers_.erase(it);
  }

  void setHandler(std::function<void(TransportMessage)> handler) {
    handler_ = std::move(handler);
    while (auto queued = recv_queue_.tryPop()) handler_(std::move(*queued));
    handler_ready_ = true;
  }

  // Receives one multi-part message from `socket` (a dealer's under its lock, released before the
  // message is handled), on the I/O thread or a dealer's host; returns false when none is waiting.
  bool receiveOne(void* socket, bool is_router, PeerId dealer_peer, Dealer* dealer = nullptr) {
    std::unique_lock<std::mutex> lock;
    if (dealer != nullptr) {
      lock = std::unique_lock<std::mutex>(dealer->mu);
      socket = dealer->socket();
      if (socket == nullptr) return false;  // disconnected meanwhile
    }
    std::vector<Blob> frames;
    std::string routing_id;
    const Received got = receiveMessage(socket, is_router, kMaxFramesPerMessage, &frames, &routing_id);
    if (got == Received::kNone) return false;
    if (got == Received::kBroken) {
      LOG(WARNING) << options_.name << ": receive failed mid-message: " << zmqError();
      return true;
    }
    const bool dropped = got == Received::kTooManyFrames;
    if (lock.owns_lock()) lock.unlock();
    PeerId peer = dealer_peer;
    if (is_router) {
      std::optional<PeerId> known = incoming_.find(routing_id);
      if (!known && incoming_.full()) {
        LOG_EVERY_N(WARNING, 1000) << options_.name << ": " << IncomingPeers::kMaxIncomingPeers
                                   << " incoming peers already known; dropped a message from a new one";
        return true;
      }
      if (known) {
        peer = *known;
      } else {
        std::lock_guard<std::mutex> lock(names_mu_);
        peer = next_peer_++;
        names_[peer] = "incoming connection #" + std::to_string(peer);
        incoming_.add(routing_id, peer);
      }
    }
    if (dropped || frames.empty()) {
      LOG_EVERY_N(WARNING, 100) << options_.name << ": dropped a message with "
                                << (frames.empty() ? "no frames" : "too many frames") << " from " << describe(peer);
      return true;
    }
    if (shm::isMarker(frames[0])) {
      shm::SharedMemoryLinks::Incoming in = links_.incoming(peer, std::move(frames));
      if (!in.answer.empty()) (void)sendAsIs(peer, std::move(in.answer));  // fails only once closed
      if (in.frames.empty()) return true;
      frames = std::move(in.frames);
    }
    if (handler_)
      handler_(TransportMessage{peer, std::move(frames)});
    else
      recv_queue_.tryPush(TransportMessage{peer, std::move(frames)});
    return true;
  }

  // The I/O thread waits on plain descriptors only (io_wait.h). Dealers are watched through their
  // ZMQ_FD (in the epoll set dealer_fds_, except while a caller receives there), the listener and the
  // handshake guard's sockets through theirs. A ZMQ_FD only says "look at the socket": once the socket
  // took its news in (by a receive here, or a send, which then sets `look` or listener_look_), it stays
  // quiet until the next news, so each socket is read until it has no message left or is looked at
  // again without waiting. A wait that times out looks at every socket, so that a lost signal costs
  // a delay (at most 100 ms while idle), never a hang. While a caller hosts or parked a dealer, the
  // wait is short, so that a dealer parked for Dealer::kParkedIdle comes back (dealer.h).
  void ioLoop() {
    bool stopping = false;
    std::vector<epoll_event> ready_events;
    std::unordered_set<PeerId> ready;
    auto last_sweep = std::chrono::steady_clock::now();
    while (!stopping) {
      bool room = !recv_queue_.full();
      bool look_now = listener_look_;
      io_waits_long_ = true;  // before looking at the dealers: see receiveOn
      bool away = false;      // a caller hosts or parked a connection: take it back once idle (dealer.h)
      for (auto& [id, d] : dealers_) {
        look_now = look_now || (d->look.load() && d->withIoThread());
        away = away || !d->withIoThread();
      }
      // A full receive queue: only commands and the guard, and look again soon. A wait cut short for a
      // parked connection only looks at every socket as often as an idle wait would.
      const bool park_timer = room && !look_now && delayed_.empty() && away;
      int timeout_ms = static_cast<int>(kIdleWait.count());
      if (!room || !delayed_.empty()) timeout_ms = 2;
      if (park_timer) timeout_ms = static_cast<int>(Dealer::kParkedIdle.count());
      if (room && look_now) timeout_ms = 0;
      io_waits_long_ = timeout_ms == kIdleWait.count();
      const IoWait::Ready got =
          io_wait_.wait(room ? dealer_fds_ : -1, room ? router_fd_ : -1, guard_->descriptors(), timeout_ms);
      auto now = std::chrono::steady_clock::now();
      const bool sweep = got.timed_out && (!park_timer || now - last_sweep >= kIdleWait);
      if (sweep) last_sweep = now;
      if (got.guard || sweep) guard_->handleReady();
      while (!delayed_.empty() && delayed_.front().first <= now) {
        sendNow(delayed_.front().second);
        delayed_.pop_front();
      }

      std::deque<Command> batch;
      {
        std::lock_guard<std::mutex> lock(cmd_mu_);
        batch.swap(commands_);
      }
      for (auto& cmd : batch) {
        if (auto* c = std::get_if<SendCmd>(&cmd)) {
          doSend(*c);
          queued_sends_.fetch_sub(1);
        } else if (auto* l = std::get_if<ListenCmd>(&cmd))
          doListen(*l);
        else if (auto* k = std::get_if<ConnectCmd>(&cmd))
          doConnect(*k);
        else if (auto* h = std::get_if<HandlerCmd>(&cmd))
          setHandler(std::move(h->handler));
        else if (auto* f = std::get_if<ForgetCmd>(&cmd))
          doForget(f->peer);
        else if (auto* r = std::get_if<ReconnectHandlerCmd>(&cmd))
          reconnect_handler_ = std::move(r->handler);
        else if (auto* d = std::get_if<DisconnectCmd>(&cmd))
          doDisconnect(d->peer);
        else
          stopping = true;
      }
      room = !recv_queue_.full();
      if (stopping || !room) continue;
      ready.clear();
      if (got.dealers) {
        ready_events.resize(dealers_.size() + 1);
        int n = epoll_wait(dealer_fds_, ready_events.data(), static_cast<int>(ready_events.size()), 0);
        for (int i = 0; i < n; ++i) ready.insert(ready_events[i].data.u64);
      }
      if (away) takeBackIdleDealers();
      int unsignalled = 0;  // messages that only the sweep found (io_wait.h)
      for (auto& [id, dealer] : dealers_) unsignalled += receiveFromDealer(id, *dealer, ready.count(id) > 0, sweep);
      if (router_ != nullptr && (got.listener || listener_look_ || sweep))
        unsignalled += receiveFromListener(got.listener || listener_look_ || readableNow(router_fd_));
      io_wait_.found(unsignalled);
    }
    io_wait_.logLateFinds(options_.name);
    for (auto& d : delayed_) sendNow(d.second);
    if (faults_injected_ > 0) LOG(INFO) << options_.name << ": injected " << faults_injected_ << " test faults";
    guard_->closeSockets();
    if (router_ != nullptr) zmq_close(router_);
    std::lock_guard<std::mutex> lock(dealers_mu_);
    for (auto& [id, d] : dealers_) {
      std::lock_guard<std::mutex> closing(d->mu);
      d->close();
    }
    dealers_.clear();
  }

  // On the I/O thread: connections parked for Dealer::kParkedIdle come back, read at once (expected: no late find).
  void takeBackIdleDealers() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, d] : dealers_)
      if (d->takeBackIfIdle(now)) receiveFromDealer(id, *d, true);
  }

  // On the I/O thread: a batch of the dealer's messages when signalled (`ready`, its `look`) or swept, unless a
  // caller hosts or parked it; returns how many only the sweep found. Wakes a host that came meanwhile.
  int receiveFromDealer(PeerId peer, Dealer& dealer, bool ready, bool sweep = false) {
    if (!dealer.withIoThread()) return 0;
    bool signalled = dealer.look.exchange(false) || ready;
    if (!signalled && !sweep) return 0;
    signalled = signalled || readableNow(dealer.fd());  // news since the check above was signalled
    int n = 0;
    while (n < kRecvBatch && !recv_queue_.full() && receiveOne(nullptr, false, peer, &dealer)) {
      ++n;
      if (dealer.hosted()) dealer.wakeHost();
    }
    if (n == kRecvBatch || recv_queue_.full()) dealer.look = true;  // messages may be left
    return signalled ? 0 : n;
  }

  // On the I/O thread: a batch of the listener's messages; returns how many came without being `signalled`. The
  // receive that finds none takes in all news (a reply sent meanwhile may have), after which router_fd_ signals.
  int receiveFromListener(bool signalled) {
    int n = 0;
    while (n < kRecvBatch && !recv_queue_.full() && receiveOne(router_, true, 0)) ++n;
    listener_look_ = n == kRecvBatch || recv_queue_.full();
    return signalled ? 0 : n;
  }

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
  std::mt19937_64 fault_rng_;
  std::random_device routing_id_rng_;
  std::atomic<uint64_t> reconnects_{0};
  std::atomic<uint64_t> dropped_replies_{0};  // to incoming peers whose queue was full
  std::function<void(PeerId)> reconnect_handler_;
  uint64_t faults_injected_ = 0;
  std::deque<std::pair<std::chrono::steady_clock::time_point, SendCmd>> delayed_;
  std::function<void(TransportMessage)> handler_;  // set: incoming messages go here, not to recv_queue_
  std::atomic<bool> handler_ready_{false};         // handler_ is set, for receiveOn's threads
  std::atomic<int> io_thread_waiters_{0};          // threads between begin- and endWaitOnIoThread
  std::atomic<bool> io_waits_long_{false};         // the I/O thread may be in a kIdleWait wait
};

}  // namespace

std::unique_ptr<Transport> makeZmqTransport(const TransportOptions& options) {
  return std::make_unique<ZmqTransport>(options);
}

}  // namespace zps
