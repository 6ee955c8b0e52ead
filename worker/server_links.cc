#include "worker/server_links.h"

#include <glog/logging.h>

#include <thread>

#include "ps/node/resolve.h"
#include "ps/wire/codec.h"

namespace zps {

using Clock = std::chrono::steady_clock;

ServerLinks::ServerLinks(const Config& config, const Authenticator& auth, int rank, Transport* transport,
                         RequestTable* requests)
    : config_(config),
      auth_(auth),
      rank_(rank),
      transport_(transport),
      requests_(requests),
      links_(config.num_servers) {}

Status ServerLinks::link(const pb::RegisterReply& book) {
  for (const auto& n : book.nodes()) {
    if (n.role() != pb::SERVER) continue;
    if (n.rank() < 0 || n.rank() >= config_.num_servers)
      return ProtocolError("address book has server rank out of range");
    const int rank = n.rank();
    std::string address = n.host() + ":" + std::to_string(n.port());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (links_[rank].address == address) continue;
    }
    ZPS_ASSIGN_OR_RETURN(std::string ip, resolveWithRetry(n.host(), config_.connect_timeout,
                                                          "server " + std::to_string(rank) + " host"));
    ZPS_ASSIGN_OR_RETURN(PeerId peer, transport_->connect(ip, static_cast<int>(n.port())));
    std::lock_guard<std::mutex> lock(mu_);
    // Replies from a lost server's old address are ignored.
    server_of_peer_.erase(links_[rank].peer);
    links_[rank] = Link{};
    links_[rank].peer = peer;
    links_[rank].address = address;
    server_of_peer_[peer] = rank;
  }
  return Status::OK();
}

Status ServerLinks::hello(const std::function<bool()>& stop_retrying) {
  const auto deadline = Clock::now() + config_.connect_timeout;
  for (;;) {
    Status hello = helloOnce(deadline);
    if (hello.code() != StatusCode::kUnavailable || stop_retrying() || Clock::now() >= deadline) return hello;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

OutgoingRequest ServerLinks::helloTo(int server, uint64_t upgrade_token, std::optional<PeerId> peer) {
  OutgoingRequest o;
  pb::DataHeader h = requests_->header(pb::CMD_HELLO, 0);
  h.set_magic(wire::kMagic);
  h.set_protocol_version(wire::kProtocolVersion);
  h.set_worker_rank(rank_);
  h.set_local_rank(static_cast<uint32_t>(config_.local_rank));
  std::string nonce;
  if (auth_.enabled()) {
    nonce = Authenticator::newNonce();
    h.set_auth_nonce(nonce);
    h.set_auth_time_ms(Authenticator::nowMs());
    h.set_auth_mac(auth_.mac(kHelloContext, helloMacInput(h)));
  }
  if (upgrade_token != 0) h.set_upgrade_token(upgrade_token);
  o.id = h.request_id();
  o.request.server = server;
  o.request.via = peer;
  o.request.on_reply = [this, server, nonce](const pb::DataHeader& reply) -> Status {
    const std::string from = describe(server);
    if (!nonce.empty() && !auth_.verify(kHelloReplyContext, nonce, reply.auth_mac()))
      return FailedPrecondition(from + " could not prove it knows ZPS_AUTH_TOKEN");
    if (!reply.ipc_name().empty() && reply.upgrade_token() != 0) {  // connectIpc checks the name
      std::lock_guard<std::mutex> lock(mu_);
      links_[server].ipc_name = reply.ipc_name();
      links_[server].upgrade_token = reply.upgrade_token();
    }
    return Status::OK();
  };
  o.frames = wire::encodeData(h);
  return o;
}

Status ServerLinks::helloOnce(Clock::time_point deadline) {
  FanOut fan("connecting to the servers");
  for (int s = 0; s < config_.num_servers; ++s) fan.requests.push_back(helloTo(s, 0));
  return requests_->run(std::move(fan),
                        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                                 std::chrono::milliseconds(1)));
}

void ServerLinks::moveToIpc(const std::string& unix_sockets) {
  moveToIpcIfAllowed(unix_sockets);
  LOG(INFO) << "worker " << rank_ << ": links to the servers: " << transports()
            << (config_.ipc ? "" : " (ZPS_IPC=0: same-host servers stay on TCP)");
}

std::string ServerLinks::transports() const {
  constexpr int kNamed = 8;  // a long job's log names the first few; the rest are counted
  std::vector<PeerId> peers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Link& link : links_) peers.push_back(link.peer);
  }
  std::string text;
  int ipc = 0;
  for (size_t s = 0; s < peers.size(); ++s) {
    const std::string endpoint = transport_->describe(peers[s]);
    if (endpoint.rfind("ipc://", 0) == 0) ++ipc;
    if (s < kNamed) text += (s == 0 ? "" : ", ") + std::to_string(s) + " " + endpoint;
  }
  if (peers.size() > kNamed)
    text += ", ... (" + std::to_string(ipc) + " of " + std::to_string(peers.size()) + " on ipc)";
  return text;
}

void ServerLinks::moveToIpcIfAllowed(const std::string& unix_sockets) {
  if (!config_.ipc) return;
  // Injected faults could drop the one HELLO that moves a connection (it has no resend); they exist
  // to test resends over the ordinary path anyway.
  if (!config_.test_faults.empty()) return;
  FanOut fan("moving to the servers' ipc sockets");
  std::vector<std::pair<int, PeerId>> moving;
  for (int s = 0; s < config_.num_servers; ++s) {
    Link link;
    {
      std::lock_guard<std::mutex> lock(mu_);
      link = links_[s];
    }
    if (link.on_ipc || link.ipc_name.empty() || link.upgrade_token == 0 ||
        unix_sockets.find("@" + link.ipc_name) == std::string::npos)
      continue;
    auto peer = transport_->connectIpc(link.ipc_name);
    if (!peer.ok()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      server_of_peer_[*peer] = s;
    }
    fan.requests.push_back(helloTo(s, link.upgrade_token, *peer));
    moving.emplace_back(s, *peer);
  }
  if (moving.empty()) return;
  Status moved = requests_->run(std::move(fan),
                                std::min<std::chrono::milliseconds>(config_.connect_timeout, std::chrono::seconds(5)));
  if (!moved.ok()) {
    LOG(WARNING) << "worker " << rank_ << ": staying on TCP: " << moved.message();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto [s, peer] : moving) {
    // Replies to requests already sent still come over TCP: both peers stay mapped.
    links_[s].peer = peer;
    links_[s].on_ipc = true;
  }
  LOG(INFO) << "worker " << rank_ << ": " << moving.size() << " of " << config_.num_servers
            << " servers are on this host; using their ipc:// sockets";
}

Status ServerLinks::send(const RequestSpec& to, std::vector<Blob> frames) {
  PeerId peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    peer = to.via ? *to.via : links_[to.server].peer;
  }
  return transport_->send(peer, std::move(frames));
}

bool ServerLinks::receiveFrom(int server, Clock::time_point deadline, const std::function<bool()>& done) {
  PeerId peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (server < 0 || server >= static_cast<int>(links_.size()) || links_[server].peer == 0) return false;
    peer = links_[server].peer;
  }
  return transport_->receiveOn(peer, deadline, done);
}

std::optional<int> ServerLinks::serverOf(PeerId peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = server_of_peer_.find(peer);
  if (it == server_of_peer_.end()) return std::nullopt;
  return it->second;
}

std::string ServerLinks::describe(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return "server " + std::to_string(server) + " (" + links_[server].address + ")";
}

}  // namespace zps
