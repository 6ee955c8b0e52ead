// ZeroMQ transport: what callers' threads do (ps/transport/zmq/zmq_transport_impl.h has the design).
#include <glog/logging.h>
#include <zmq.h>

#include "ps/transport/zmq/zmq_transport_impl.h"

namespace zps {
namespace zmq_transport {

ZmqTransport::ZmqTransport(const TransportOptions& options)
    : options_(options), recv_queue_(options.recv_queue_capacity), links_(options.name, /*enabled=*/true) {
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

StatusOr<int> ZmqTransport::listen(const std::string& host, int port) {
  auto promise = std::make_shared<std::promise<StatusOr<int>>>();
  auto future = promise->get_future();
  enqueue(ListenCmd{host, port, promise});
  if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
    return DeadlineExceeded(options_.name + ": I/O thread did not bind " + host + ":" + std::to_string(port) +
                            " within 30 s");
  return future.get();
}

StatusOr<PeerId> ZmqTransport::connect(const Endpoint& to) {
  if (to.isIpc()) {
    const std::string& name = to.ipc_name;
    if (name.size() > 64 || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
      return InvalidArgument("'" + name + "' is not an ipc socket name");
    StatusOr<PeerId> peer = connectEndpoint("ipc://@" + name, to.handshake_password);
    if (peer.ok()) links_.offerTo(*peer);  // the peer is on this host
    return peer;
  }
  const std::string& host = to.host;
  const int port = to.port;
  in6_addr buf6;
  in_addr buf4;
  if (inet_pton(AF_INET, host.c_str(), &buf4) != 1 && inet_pton(AF_INET6, host.c_str(), &buf6) != 1)
    return InvalidArgument("connect needs an IP address, got '" + host + "' (resolve names first)");
  if (port <= 0 || port > 65535) return InvalidArgument("port " + std::to_string(port) + " is out of range");
  std::string endpoint = host.find(':') != std::string::npos ? "tcp://[" + host + "]:" + std::to_string(port)
                                                             : "tcp://" + host + ":" + std::to_string(port);
  return connectEndpoint(endpoint, to.handshake_password);
}

StatusOr<PeerId> ZmqTransport::connectEndpoint(const std::string& endpoint, const std::string& password) {
  PeerId id;
  {
    std::lock_guard<std::mutex> lock(names_mu_);
    id = next_peer_++;
    names_[id] = endpoint;
  }
  enqueue(ConnectCmd{id, endpoint, password});
  return id;
}

Status ZmqTransport::send(PeerId peer, std::vector<Blob> frames) {
  if (frames.empty()) return InvalidArgument("cannot send a message with no frames");
  return sendAsIs(peer, links_.outgoing(peer, std::move(frames)));
}

Status ZmqTransport::sendAsIs(PeerId peer, std::vector<Blob> frames) {
  if (closed_.load()) return Aborted(options_.name + " is closed");
  if (sendWithoutHandOff(peer, frames)) return Status::OK();
  queued_sends_.fetch_add(1);
  enqueue(SendCmd{peer, std::move(frames)});
  return Status::OK();
}

StatusOr<TransportMessage> ZmqTransport::recv(std::chrono::steady_clock::time_point deadline) {
  auto msg = recv_queue_.pop(deadline);
  if (!msg) {
    if (closed_.load()) return Aborted(options_.name + " is closed");
    return DeadlineExceeded(options_.name + ": no message before the deadline");
  }
  return std::move(*msg);
}

void ZmqTransport::close() {
  if (closed_.exchange(true)) return;
  enqueue(StopCmd{});
  if (io_thread_.joinable()) io_thread_.join();
  recv_queue_.close();
  ::close(dealer_fds_);
  zmq_ctx_term(ctx_);
}

bool ZmqTransport::receiveOn(PeerId peer, std::chrono::steady_clock::time_point deadline,
                             const std::function<bool()>& done) {
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

void ZmqTransport::beginWaitOnIoThread() {
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

void ZmqTransport::wakeReceivers() {
  std::lock_guard<std::mutex> lock(dealers_mu_);
  for (auto& [id, d] : dealers_) {
    if (d->hosted()) d->wakeHost();
  }
}

std::string ZmqTransport::describe(PeerId peer) const {
  std::lock_guard<std::mutex> lock(names_mu_);
  auto it = names_.find(peer);
  return it == names_.end() ? "peer #" + std::to_string(peer) : it->second;
}

HandshakeCredentials ZmqTransport::credentialsOf(const TransportOptions& o) {
  return {o.handshake_password,  o.curve_server_secret, o.curve_server_public,
          o.curve_client_public, o.curve_client_secret, o.credential_name};
}

void ZmqTransport::enqueue(Command cmd) {
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    commands_.push_back(std::move(cmd));
  }
  wake();
}

bool ZmqTransport::sendWithoutHandOff(PeerId peer, const std::vector<Blob>& frames) {
  if (queued_sends_.load() != 0) return false;
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

std::shared_ptr<Dealer> ZmqTransport::dealerOf(PeerId peer) {
  std::lock_guard<std::mutex> lock(dealers_mu_);
  auto it = dealers_.find(peer);
  return it == dealers_.end() ? nullptr : it->second;
}

bool ZmqTransport::sendOnDealer(Dealer& dealer, const std::vector<Blob>& frames) {
  dealer.prepareSend();
  const bool ok = sendFrames(dealer.socket(), nullptr, frames);
  if (!dealer.senderReceivesNext() && hasInput(dealer.socket())) dealer.noticeWaiting();
  return ok;
}

void ZmqTransport::setHandler(std::function<void(TransportMessage)> handler) {
  handler_ = std::move(handler);
  while (auto queued = recv_queue_.tryPop()) handler_(std::move(*queued));
  handler_ready_ = true;
}

}  // namespace zmq_transport

std::unique_ptr<Transport> makeZmqTransport(const TransportOptions& options) {
  return std::make_unique<zmq_transport::ZmqTransport>(options);
}

}  // namespace zps
