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
    // Each server process has a password of its own (ps/node/auth.h); "" = the transport's (no PLAIN).
    const std::string password =
        auth_.enabled() && !config_.curve ? dataHandshakePassword(auth_, n.data_salt()) : std::string();
    Link old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (links_[rank].address == address && links_[rank].password == password) continue;
      old = links_[rank];
    }
    ZPS_ASSIGN_OR_RETURN(std::string ip, resolveWithRetry(n.host(), config_.connect_timeout,
                                                          "server " + std::to_string(rank) + " host"));
    ZPS_ASSIGN_OR_RETURN(PeerId peer, transport_->connect(Endpoint::tcp(ip, static_cast<int>(n.port()), password)));
    // A new server process at the old address: the old connections' password no longer opens it.
    if (old.address == address) {
      for (PeerId stale : {old.peer, old.tcp, old.lane})
        if (stale != 0) transport_->disconnect(stale);
    }
    std::lock_guard<std::mutex> lock(mu_);
    // Replies from a lost server's old address are ignored.
    server_of_peer_.erase(links_[rank].peer);
    server_of_peer_.erase(links_[rank].lane);
    links_[rank] = Link{};
    links_[rank].peer = peer;
    links_[rank].address = address;
    links_[rank].password = password;
    links_[rank].ip = ip;
    links_[rank].port = static_cast<int>(n.port());
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

OutgoingRequest ServerLinks::helloTo(int server, uint64_t upgrade_token, std::optional<PeerId> peer,
                                     uint64_t lane_token) {
  OutgoingRequest o;
  pb::Data d = requests_->newRequest();
  pb::Hello* h = d.mutable_hello();
  h->set_magic(wire::kMagic);
  h->set_worker_rank(rank_);
  h->set_local_rank(static_cast<uint32_t>(config_.local_rank));
  std::string nonce;
  if (lane_token != 0) h->set_lane_token(lane_token);  // before the MAC, which covers it
  if (auth_.enabled()) {
    nonce = Authenticator::newNonce();
    h->set_auth_nonce(nonce);
    h->set_auth_time_ms(Authenticator::nowMs());
    h->set_auth_mac(auth_.mac(kHelloContext, helloMacInput(*h, d.protocol_version())));
  }
  if (upgrade_token != 0) h->set_upgrade_token(upgrade_token);
  o.id = d.request_id();
  o.request.server = server;
  o.request.via = peer;
  o.request.on_reply = [this, server, nonce, peer, lane_token](const pb::Data& answer) -> Status {
    // Another answer body reads as an empty HelloReply (no MAC, no ipc offer, no lane, not fused).
    const pb::HelloReply& reply = answer.hello_reply();
    const std::string from = describe(server);
    if (!nonce.empty() && !auth_.verify(kHelloReplyContext, nonce, reply.auth_mac()))
      return FailedPrecondition(from + " could not prove it knows ZPS_AUTH_TOKEN");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (lane_token != 0) {
        links_[server].lane_open = peer && links_[server].lane == *peer;
        return Status::OK();
      }
      // A (new) HELLO on the first connection: the server binds the lane afresh.
      links_[server].lane_token = reply.lane_token();
      links_[server].lane_open = false;
      links_[server].accepts_fused = reply.accepts_fused();
    }
    if (config_.fusion_bytes > 0 && !reply.accepts_fused()) {
      LOG_FIRST_N(WARNING, 8) << "worker " << rank_ << ": " << from
                              << " does not take fused messages (an older zps): requests to it go one per message";
    }
    if (!reply.ipc_name().empty() && reply.upgrade_token() != 0) {  // connect checks the name
      std::lock_guard<std::mutex> lock(mu_);
      links_[server].ipc_name = reply.ipc_name();
      links_[server].upgrade_token = reply.upgrade_token();
    }
    return Status::OK();
  };
  o.frames = wire::encodeBody(std::move(d));
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
    auto peer = transport_->connect(Endpoint::ipc(link.ipc_name, link.password));
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
    links_[s].tcp = links_[s].peer;
    links_[s].peer = peer;
    links_[s].on_ipc = true;
  }
  LOG(INFO) << "worker " << rank_ << ": " << moving.size() << " of " << config_.num_servers
            << " servers are on this host; using their ipc:// sockets";
}

void ServerLinks::wantLanes() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (lanes_wanted_) return;
    lanes_wanted_ = true;
  }
  openLanes();
}

void ServerLinks::openLanes() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lanes_wanted_ || !config_.push_lane) return;
  }
  FanOut fan("opening the push lanes to the servers");
  for (int s = 0; s < config_.num_servers; ++s) {
    Link link;
    {
      std::lock_guard<std::mutex> lock(mu_);
      link = links_[s];
      links_[s].lane_token = 0;  // one try per HELLO reply: the server accepts a token once
    }
    if (link.lane_open || link.lane_token == 0) continue;
    auto lane = lanePeer(s, link);
    if (!lane.ok()) {
      LOG(WARNING) << "worker " << rank_ << ": no push lane to " << describe(s) << " (its scheduled pushes stay on "
                   << "the first connection): " << lane.status().message();
      continue;
    }
    fan.requests.push_back(helloTo(s, 0, *lane, link.lane_token));
  }
  if (fan.requests.empty()) return;
  Status opened = requests_->run(std::move(fan),
                                 std::min<std::chrono::milliseconds>(config_.connect_timeout, std::chrono::seconds(5)));
  if (!opened.ok())
    LOG(WARNING) << "worker " << rank_
                 << ": scheduled pushes stay on the first connection where no lane opened: " << opened.message();
  LOG(INFO) << "worker " << rank_ << ": push lanes open to " << openLaneCount() << " of " << config_.num_servers
            << " servers";
}

StatusOr<PeerId> ServerLinks::lanePeer(int server, const Link& link) {
  if (link.lane != 0) return link.lane;  // bound again after a recovery
  StatusOr<PeerId> lane = transport_->connect(link.on_ipc ? Endpoint::ipc(link.ipc_name, link.password)
                                                          : Endpoint::tcp(link.ip, link.port, link.password));
  if (!lane.ok()) return lane;
  std::lock_guard<std::mutex> lock(mu_);
  if (links_[server].peer != link.peer) return Unavailable("the server was replaced meanwhile");
  links_[server].lane = *lane;
  server_of_peer_[*lane] = server;
  return lane;
}

bool ServerLinks::acceptsFused(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  return server >= 0 && static_cast<size_t>(server) < links_.size() && links_[server].accepts_fused;
}

int ServerLinks::openLaneCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  int open = 0;
  for (const Link& link : links_) open += link.lane_open ? 1 : 0;
  return open;
}

Status ServerLinks::send(const RequestSpec& to, std::vector<Blob> frames) {
  PeerId peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Link& link = links_[to.server];
    // Scheduled pushes (they hold push credit) take the lane, resends included.
    peer = to.via ? *to.via : to.scheduledPush() && link.lane_open ? link.lane : link.peer;
  }
  return transport_->send(peer, std::move(frames));
}

bool ServerLinks::receiveFrom(int server, bool pushes, Clock::time_point deadline, const std::function<bool()>& done) {
  PeerId peer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (server < 0 || server >= static_cast<int>(links_.size()) || links_[server].peer == 0 ||
        (pushes && links_[server].lane_open))
      return false;
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
