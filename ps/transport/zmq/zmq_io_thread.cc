// What the ZeroMQ transport's I/O thread does (ps/transport/zmq/zmq_transport_impl.h): it runs the
// commands other threads queue (listen, connect, send, forget), waits on every socket, and receives
// from the listener and the dealers, handing each message to the handler or the receive queue.
#include <glog/logging.h>
#include <zmq.h>

#include "ps/transport/zmq/zmq_transport_impl.h"

namespace zps::zmq_transport {

void ZmqTransport::doListen(ListenCmd& cmd) {
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

void ZmqTransport::doConnect(const ConnectCmd& cmd) {
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

void ZmqTransport::sendNow(const SendCmd& cmd) {
  bool ok = true;
  if (auto it = dealers_.find(cmd.peer); it != dealers_.end()) {
    std::lock_guard<std::mutex> lock(it->second->mu);
    ok = sendOnDealer(*it->second, cmd.frames);
  } else if (const std::string* routing_id = incoming_.routingIdOf(cmd.peer); routing_id && router_) {
    ok = sendFrames(router_, routing_id, cmd.frames);
    if (!ok && zmq_errno() == EAGAIN) dropped_replies_.fetch_add(1);  // the peer's queue is full
    listener_look_ = true;                                            // the send may have taken in the listener's news
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

void ZmqTransport::doForget(PeerId peer) {
  links_.forget(peer);
  std::optional<PeerId> gone = incoming_.forget(peer);
  if (!gone) return;
  std::lock_guard<std::mutex> lock(names_mu_);
  names_.erase(*gone);
}

void ZmqTransport::doDisconnect(PeerId peer) {
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

bool ZmqTransport::receiveOne(void* socket, bool is_router, PeerId dealer_peer, Dealer* dealer) {
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

void ZmqTransport::ioLoop() {
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
    const bool park_timer = room && !look_now && away;
    int timeout_ms = static_cast<int>(kIdleWait.count());
    if (!room) timeout_ms = 2;
    if (park_timer) timeout_ms = static_cast<int>(Dealer::kParkedIdle.count());
    if (room && look_now) timeout_ms = 0;
    io_waits_long_ = timeout_ms == kIdleWait.count();
    const IoWait::Ready got =
        io_wait_.wait(room ? dealer_fds_ : -1, room ? router_fd_ : -1, guard_->descriptors(), timeout_ms);
    auto now = std::chrono::steady_clock::now();
    const bool sweep = got.timed_out && (!park_timer || now - last_sweep >= kIdleWait);
    if (sweep) last_sweep = now;
    if (got.guard || sweep) guard_->handleReady();

    std::deque<Command> batch;
    {
      std::lock_guard<std::mutex> lock(cmd_mu_);
      batch.swap(commands_);
    }
    for (auto& cmd : batch) {
      if (auto* c = std::get_if<SendCmd>(&cmd)) {
        sendNow(*c);
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
  guard_->closeSockets();
  if (router_ != nullptr) zmq_close(router_);
  std::lock_guard<std::mutex> lock(dealers_mu_);
  for (auto& [id, d] : dealers_) {
    std::lock_guard<std::mutex> closing(d->mu);
    d->close();
  }
  dealers_.clear();
}

void ZmqTransport::takeBackIdleDealers() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, d] : dealers_)
    if (d->takeBackIfIdle(now)) receiveFromDealer(id, *d, true);
}

int ZmqTransport::receiveFromDealer(PeerId peer, Dealer& dealer, bool ready, bool sweep) {
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

int ZmqTransport::receiveFromListener(bool signalled) {
  int n = 0;
  while (n < kRecvBatch && !recv_queue_.full() && receiveOne(router_, true, 0)) ++n;
  listener_look_ = n == kRecvBatch || recv_queue_.full();
  return signalled ? 0 : n;
}

}  // namespace zps::zmq_transport
