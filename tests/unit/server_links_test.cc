// ServerLinks (worker/server_links.h) over a fake transport that answers inside send, as a server
// would: connections kept and replaced, HELLO's MAC both ways and retries, the ipc move and why it
// stays on TCP, fused messages, push lanes, per-server passwords.
#include "worker/server_links.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ps/wire/codec.h"
#include "tests/unit/function_route.h"

namespace zps {
namespace {

using namespace std::chrono_literals;

// A transport that hands out peer ids and answers every data message through `reply` (none when it
// returns nullopt), delivered to the request table at once, inside send.
class FakeTransport final : public Transport {
 public:
  struct Sent {
    PeerId peer;
    pb::Data data;
  };
  std::function<std::optional<pb::Data>(PeerId, const pb::Data&)> reply;
  std::function<std::optional<int>(PeerId)> server_of;  // the worker's peer-to-server map
  RequestTable* table = nullptr;
  std::vector<std::string> connects;   // "host:port" or "ipc:name", in order
  std::vector<std::string> passwords;  // of each TCP connect, in order
  std::vector<PeerId> disconnected;
  std::vector<Sent> sent;
  bool fail_ipc = false;

  StatusOr<int> listen(const std::string&, int) override { return FailedPrecondition("a worker's links never listen"); }
  StatusOr<PeerId> connect(const Endpoint& to) override {
    if (to.isIpc()) {
      if (fail_ipc) return Unavailable("no such socket");
      connects.push_back("ipc:" + to.ipc_name);
    } else {
      passwords.push_back(to.handshake_password);
      connects.push_back(to.host + ":" + std::to_string(to.port));
    }
    return next_peer_++;
  }
  Status send(PeerId peer, std::vector<Blob> frames) override {
    auto decoded = wire::decode(frames, wire::Limits());
    REQUIRE(decoded.ok());
    const pb::Data& request = std::get<wire::DataMessage>(*decoded).data;
    sent.push_back({peer, request});
    if (!reply) return Status::OK();
    std::optional<pb::Data> answer = reply(peer, request);
    if (!answer) return Status::OK();
    answer->set_request_id(request.request_id());
    std::optional<int> server = server_of(peer);
    REQUIRE(server.has_value());
    table->deliver(*server, *answer, DType::kUInt8, Blob(), "fake server");
    return Status::OK();
  }
  StatusOr<TransportMessage> recv(std::chrono::steady_clock::time_point) override {
    return DeadlineExceeded("nothing");
  }
  void onMessage(std::function<void(TransportMessage)>) override {}
  void close() override {}
  std::string describe(PeerId peer) const override { return "fake peer " + std::to_string(peer); }
  void forget(PeerId) override {}
  std::string handshakeFailure(PeerId) const override { return ""; }
  uint64_t refusedHandshakes() const override { return 0; }
  void onReconnect(std::function<void(PeerId)>) override {}
  void disconnect(PeerId peer) override { disconnected.push_back(peer); }
  uint64_t reconnects() const override { return 0; }
  // The caller could receive on the connection itself.
  bool receiveOn(PeerId, std::chrono::steady_clock::time_point, const std::function<bool()>&) override { return true; }

 private:
  PeerId next_peer_ = 1;
};

pb::RegisterReply book(const std::vector<int>& ports) {
  pb::RegisterReply reply;
  for (size_t i = 0; i < ports.size(); ++i) {
    auto* n = reply.add_nodes();
    n->set_role(pb::SERVER);
    n->set_rank(static_cast<int>(i));
    n->set_host("127.0.0.1");
    n->set_port(static_cast<uint32_t>(ports[i]));
  }
  auto* worker = reply.add_nodes();  // not a server: no link
  worker->set_role(pb::WORKER);
  worker->set_rank(0);
  worker->set_host("127.0.0.1");
  worker->set_port(7000);
  return reply;
}

// Worker rank 3 with links to `servers` servers over a FakeTransport.
struct Links {
  Config config;
  Authenticator auth;
  FakeTransport transport;
  testing::FunctionRoute route;
  std::unique_ptr<RequestTable> table;
  std::unique_ptr<ServerLinks> links;

  explicit Links(int servers, std::string token = "", std::string test_faults = "")
      : auth(Authenticator::withToken(std::move(token))) {
    config.num_servers = servers;
    config.connect_timeout = 2s;
    config.test_faults = std::move(test_faults);
    route.on_send = [this](const RequestSpec& to, std::vector<Blob> frames) {
      return links->send(to, std::move(frames));
    };
    route.on_describe = [this](int server) { return links->describe(server); };
    table = std::make_unique<RequestTable>(&route, 0ms);
    links = std::make_unique<ServerLinks>(config, auth, 3, &transport, table.get());
    transport.table = table.get();
    transport.server_of = [this](PeerId peer) { return links->serverOf(peer); };
  }
};

// A pull of key 1, as a worker sends it.
std::vector<Blob> pullOfKey1(RequestTable& table) {
  pb::Data d = table.newRequest();
  d.mutable_tensor()->set_op(pb::OP_PULL);
  d.mutable_tensor()->set_key(1);
  return wire::encodeBody(std::move(d));
}

// A server's HELLO reply: its MAC over the worker's nonce when `auth` has a token, and an ipc offer
// when `ipc_name` is set.
pb::Data helloReply(const Authenticator& auth, const pb::Data& request, const std::string& ipc_name = "",
                    uint64_t upgrade_token = 0) {
  pb::Data d;
  pb::HelloReply* r = d.mutable_hello_reply();
  if (auth.enabled()) r->set_auth_mac(auth.mac(kHelloReplyContext, request.hello().auth_nonce()));
  if (!ipc_name.empty()) {
    r->set_ipc_name(ipc_name);
    r->set_upgrade_token(upgrade_token);
  }
  return d;
}

// A server's ERROR answer.
pb::Data errorAnswer(const std::string& text, bool recovering = false) {
  pb::Data d;
  d.mutable_error()->set_text(text);
  d.mutable_error()->set_recovering(recovering);
  return d;
}

TEST_CASE("server links: link connects each server once and maps its peer", "[server_links]") {
  Links l(2);
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  CHECK(l.transport.connects == std::vector<std::string>{"127.0.0.1:9000", "127.0.0.1:9001"});
  CHECK(l.links->serverOf(1) == 0);
  CHECK(l.links->serverOf(2) == 1);
  CHECK_FALSE(l.links->serverOf(3).has_value());
  CHECK(l.links->describe(1) == "server 1 (127.0.0.1:9001)");

  // The same book again (a recovery's book where these servers kept their addresses): no new link.
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  CHECK(l.transport.connects.size() == 2);
}

TEST_CASE("server links: a replacement server's new address replaces its link and its peer", "[server_links]") {
  Links l(2);
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  REQUIRE(l.links->link(book({9000, 9501})).ok());
  CHECK(l.transport.connects.back() == "127.0.0.1:9501");
  CHECK(l.transport.connects.size() == 3);
  CHECK_FALSE(l.links->serverOf(2).has_value());  // replies from the lost server's address are ignored
  CHECK(l.links->serverOf(3) == 1);
  CHECK(l.links->describe(1) == "server 1 (127.0.0.1:9501)");
  REQUIRE(l.links->send(RequestSpec::to(1), pullOfKey1(*l.table)).ok());
  CHECK(l.transport.sent.back().peer == 3);
}

TEST_CASE("server links: each server's PLAIN password comes from its salt, a new salt reconnects", "[server_links]") {
  const std::string token = "server-links-test-token-0123456789";
  Links l(2, token);
  pb::RegisterReply first = book({9000, 9001});
  first.mutable_nodes(0)->set_data_salt("salt-of-server-0");
  first.mutable_nodes(1)->set_data_salt("salt-of-server-1");
  REQUIRE(l.links->link(first).ok());
  const Authenticator auth = Authenticator::withToken(token);
  REQUIRE(l.transport.passwords.size() == 2);
  CHECK(l.transport.passwords[0] == dataHandshakePassword(auth, "salt-of-server-0"));
  CHECK(l.transport.passwords[1] == dataHandshakePassword(auth, "salt-of-server-1"));
  CHECK(l.transport.passwords[0] != l.transport.passwords[1]);
  // Server 1 restarted in place (same address, a new process): connect again, close the old peer.
  pb::RegisterReply second = first;
  second.mutable_nodes(1)->set_data_salt("salt-of-server-1-again");
  REQUIRE(l.links->link(second).ok());
  REQUIRE(l.transport.passwords.size() == 3);
  CHECK(l.transport.passwords[2] == dataHandshakePassword(auth, "salt-of-server-1-again"));
  CHECK(l.transport.connects.back() == "127.0.0.1:9001");
  CHECK(l.transport.disconnected == std::vector<PeerId>{2});
  CHECK(l.links->serverOf(3) == 1);
  CHECK_FALSE(l.links->serverOf(2).has_value());
  // The same book again: nothing changes.
  REQUIRE(l.links->link(second).ok());
  CHECK(l.transport.passwords.size() == 3);
}

TEST_CASE("server links: an address book with a server rank out of range is a protocol error", "[server_links]") {
  Links l(2);
  for (int rank : {2, -1}) {
    auto b = book({9000, 9001});
    b.mutable_nodes(1)->set_rank(rank);
    Status s = l.links->link(b);
    CHECK(s.code() == StatusCode::kProtocol);
    CHECK_THAT(s.message(), Catch::Contains("server rank out of range"));
  }
}

TEST_CASE("server links: hello names this worker to every server, with a MAC both ways", "[server_links]") {
  Links l(2, "job-token");
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  l.transport.reply = [&](PeerId, const pb::Data& h) -> std::optional<pb::Data> { return helloReply(l.auth, h); };
  REQUIRE(l.links->hello([] { return false; }).ok());
  REQUIRE(l.transport.sent.size() == 2);
  for (const auto& sent : l.transport.sent) {
    const pb::Hello& h = sent.data.hello();
    CHECK(wire::commandOf(sent.data) == pb::CMD_HELLO);
    CHECK(h.magic() == wire::kMagic);
    CHECK(sent.data.protocol_version() == wire::kProtocolVersion);
    CHECK(h.worker_rank() == 3);
    CHECK_FALSE(h.auth_nonce().empty());
    CHECK(l.auth.verify(kHelloContext, helloMacInput(h, sent.data.protocol_version()), h.auth_mac()));
    CHECK(h.upgrade_token() == 0);
  }
  CHECK(l.transport.sent[0].peer != l.transport.sent[1].peer);
}

TEST_CASE("server links: fused messages go only to servers whose latest HELLO reply accepts them", "[server_links]") {
  Links l(2);
  l.config.fusion_bytes = 65536;
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  CHECK_FALSE(l.links->acceptsFused(0));  // no HELLO reply yet
  bool server1_upgraded = false;
  l.transport.reply = [&](PeerId peer, const pb::Data& h) -> std::optional<pb::Data> {
    pb::Data r = helloReply(l.auth, h);
    r.mutable_hello_reply()->set_accepts_fused(peer == 1 || server1_upgraded);  // peer 2, server 1, runs an older zps
    return r;
  };
  REQUIRE(l.links->hello([] { return false; }).ok());
  CHECK(l.links->acceptsFused(0));
  CHECK_FALSE(l.links->acceptsFused(1));
  CHECK_FALSE(l.links->acceptsFused(2));  // no such server
  CHECK_FALSE(l.links->acceptsFused(-1));
  // Server 1 replaced by a current one (a recovery): its new HELLO reply says so.
  server1_upgraded = true;
  REQUIRE(l.links->hello([] { return false; }).ok());
  CHECK(l.links->acceptsFused(1));
}

TEST_CASE("server links: a server that cannot prove the token fails hello, naming it", "[server_links]") {
  Links l(2, "job-token");
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  const Authenticator impostor = Authenticator::withToken("another-token");
  l.transport.reply = [&](PeerId peer, const pb::Data& h) -> std::optional<pb::Data> {
    return helloReply(peer == 2 ? impostor : l.auth, h);
  };
  Status s = l.links->hello([] { return false; });
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("server 1 (127.0.0.1:9001) could not prove it knows ZPS_AUTH_TOKEN"));
}

TEST_CASE("server links: hello is repeated while a server is recovering, until told to stop", "[server_links]") {
  Links l(1);
  REQUIRE(l.links->link(book({9000})).ok());
  int hellos = 0;
  int recovering_until = 3;  // the first 3 HELLOs hear "recovering"
  l.transport.reply = [&](PeerId, const pb::Data& h) -> std::optional<pb::Data> {
    if (++hellos > recovering_until) return helloReply(l.auth, h);
    return errorAnswer("recovering (generation 2)", /*recovering=*/true);
  };
  REQUIRE(l.links->hello([] { return false; }).ok());
  CHECK(hellos == 4);

  // Another lost node: the HELLO round ends with the server's answer instead of waiting it out.
  hellos = 0;
  recovering_until = 1000;
  int asked = 0;
  Status s = l.links->hello([&] { return ++asked >= 2; });
  CHECK(s.code() == StatusCode::kUnavailable);
  CHECK_THAT(s.message(), Catch::Contains("recovering (generation 2)"));
  CHECK(hellos == 2);
}

TEST_CASE("server links: hello to a server that never answers fails at the connect deadline", "[server_links]") {
  Links l(2);
  l.config.connect_timeout = 200ms;
  REQUIRE(l.links->link(book({9000, 9001})).ok());
  l.transport.reply = [&](PeerId peer, const pb::Data& h) -> std::optional<pb::Data> {
    if (peer == 2) return std::nullopt;
    return helloReply(l.auth, h);
  };
  const auto start = std::chrono::steady_clock::now();
  Status s = l.links->hello([] { return false; });
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(s.message(), Catch::Contains("connecting to the servers") && Catch::Contains("server 1 (127.0.0.1:9001)"));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

// Two servers that offer ipc sockets "zps-a" and "zps-b" in their HELLO replies; the test says which
// of them /proc/net/unix lists.
struct IpcOffer {
  Links l{2};
  std::map<PeerId, uint64_t> upgrade_token_seen;  // ipc peer -> the token its HELLO carried
  bool refuse_moves = false;

  IpcOffer() {
    REQUIRE(l.links->link(book({9000, 9001})).ok());
    l.transport.reply = [this](PeerId peer, const pb::Data& h) -> std::optional<pb::Data> {
      if (h.hello().upgrade_token() != 0) {
        upgrade_token_seen[peer] = h.hello().upgrade_token();
        if (refuse_moves) return errorAnswer("unknown upgrade token");
        return helloReply(l.auth, h);
      }
      const int server = *l.links->serverOf(peer);
      return helloReply(l.auth, h, server == 0 ? "zps-a" : "zps-b", server == 0 ? 111 : 222);
    };
    REQUIRE(l.links->hello([] { return false; }).ok());
  }
  PeerId peerUsedFor(int server) {
    REQUIRE(l.links->send(RequestSpec::to(server), pullOfKey1(*l.table)).ok());
    return l.transport.sent.back().peer;
  }
};

TEST_CASE("server links: servers whose ipc socket this host lists move there with their token", "[server_links]") {
  IpcOffer o;
  o.l.links->moveToIpc("0000: 00000002 0 10000 0001 01 12345 @zps-b\n0000: 00000002 0 10000 0001 01 1 @other\n");
  CHECK(o.l.transport.connects.back() == "ipc:zps-b");
  REQUIRE(o.upgrade_token_seen.size() == 1);
  const PeerId ipc_peer = o.upgrade_token_seen.begin()->first;
  CHECK(o.upgrade_token_seen.begin()->second == 222);
  CHECK(o.peerUsedFor(1) == ipc_peer);
  CHECK(o.peerUsedFor(0) == 1);  // server 0's socket is not on this host: TCP
  // Replies to requests sent before the move still come over TCP: both peers stay mapped.
  CHECK(o.l.links->serverOf(2) == 1);
  CHECK(o.l.links->serverOf(ipc_peer) == 1);

  // Moving again does nothing for a link already on ipc.
  const size_t connects = o.l.transport.connects.size();
  o.l.links->moveToIpc("@zps-b\n");
  CHECK(o.l.transport.connects.size() == connects);
}

TEST_CASE("server links: a refused move keeps the TCP links", "[server_links]") {
  IpcOffer o;
  o.refuse_moves = true;
  o.l.links->moveToIpc("@zps-a\n@zps-b\n");
  CHECK(o.upgrade_token_seen.size() == 2);
  CHECK(o.peerUsedFor(0) == 1);
  CHECK(o.peerUsedFor(1) == 2);
}

TEST_CASE("server links: no move without a listed socket or a connection", "[server_links]") {
  SECTION("ZPS_IPC=0") {
    IpcOffer o;
    o.l.config.ipc = false;
    o.l.links->moveToIpc("@zps-a\n@zps-b\n");
    CHECK(o.upgrade_token_seen.empty());
    CHECK(o.l.transport.connects.size() == 2);
    CHECK(o.peerUsedFor(1) == 2);
  }
  SECTION("no socket listed") {
    IpcOffer o;
    o.l.links->moveToIpc("0000: 00000002 0 10000 0001 01 1 @zps-c\n");
    CHECK(o.upgrade_token_seen.empty());
    CHECK(o.l.transport.connects.size() == 2);
  }
  SECTION("the ipc connection fails") {
    IpcOffer o;
    o.l.transport.fail_ipc = true;
    o.l.links->moveToIpc("@zps-a\n@zps-b\n");
    CHECK(o.upgrade_token_seen.empty());
    CHECK(o.peerUsedFor(0) == 1);
  }
}

TEST_CASE("server links: with test faults the links move to ipc as without them", "[server_links]") {
  // Faults wrap the transport (ps/transport/faulty_transport.h); nothing here looks at them.
  IpcOffer o;
  o.l.config.test_faults = "drop=0.1";
  o.l.links->moveToIpc("@zps-a\n@zps-b\n");
  CHECK(o.upgrade_token_seen.size() == 2);
  CHECK(o.l.transport.connects.size() == 4);
}

// Two servers that give each HELLO on a first connection a lane token (100 + its server rank, plus 10
// per HELLO after the first) and accept a lane HELLO that presents the latest one.
struct LaneOffer {
  Links l{2, "job-token"};
  std::map<PeerId, uint64_t> lane_hellos;  // lane peer -> the token its HELLO carried
  std::map<int, uint64_t> issued;          // server -> its latest token
  bool refuse_lanes = false;

  LaneOffer() {
    l.config.push_lane = true;
    REQUIRE(l.links->link(book({9000, 9001})).ok());
    l.transport.reply = [this](PeerId peer, const pb::Data& h) -> std::optional<pb::Data> {
      if (!h.has_hello()) return std::nullopt;
      const int server = *l.links->serverOf(peer);
      const pb::Hello& hello = h.hello();
      if (hello.lane_token() != 0) {
        lane_hellos[peer] = hello.lane_token();
        CHECK(l.auth.verify(kHelloContext, helloMacInput(hello, h.protocol_version()), hello.auth_mac()));
        if (refuse_lanes || hello.lane_token() != issued[server]) return errorAnswer("unknown lane token");
        return helloReply(l.auth, h);
      }
      pb::Data r = helloReply(l.auth, h);
      issued[server] = issued.count(server) ? issued[server] + 10 : 100 + server;
      r.mutable_hello_reply()->set_lane_token(issued[server]);
      return r;
    };
    REQUIRE(l.links->hello([] { return false; }).ok());
  }
  // The peer a request goes through: a scheduled push (it holds push credit; which command the frames
  // carry does not matter) or another request.
  PeerId peerUsedFor(int server, bool scheduled_push) {
    RequestSpec to = RequestSpec::to(server);
    if (scheduled_push) {
      to.priority = 0;
      to.credit = 4096;
    }
    REQUIRE(l.links->send(to, pullOfKey1(*l.table)).ok());
    return l.transport.sent.back().peer;
  }
};

TEST_CASE("server links: scheduled pushes take the push lane, everything else the first connection", "[server_links]") {
  LaneOffer o;
  o.l.links->wantLanes();
  CHECK(o.l.links->openLaneCount() == 2);
  REQUIRE(o.lane_hellos.size() == 2);
  CHECK(o.lane_hellos[3] == 100);  // peers 1 and 2 are the first connections
  CHECK(o.lane_hellos[4] == 101);
  CHECK(o.l.transport.connects.back() == "127.0.0.1:9001");
  CHECK(o.l.links->serverOf(4) == 1);
  CHECK(o.peerUsedFor(1, true) == 4);
  CHECK(o.peerUsedFor(1, false) == 2);
  CHECK(o.peerUsedFor(0, true) == 3);
  // A wait for scheduled pushes: their answers come on the lane, which the caller does not read itself;
  // any other wait is answered on the first connection, which it reads.
  CHECK_FALSE(o.l.links->receiveFrom(0, true, std::chrono::steady_clock::now() + 1s, [] { return true; }));
  CHECK(o.l.links->receiveFrom(0, false, std::chrono::steady_clock::now() + 1s, [] { return true; }));

  // A new HELLO on the first connections (a recovery): the servers forgot the lanes, so pushes go on the
  // first connection until the lanes are bound again, over the same connections.
  REQUIRE(o.l.links->hello([] { return false; }).ok());
  CHECK(o.l.links->openLaneCount() == 0);
  CHECK(o.peerUsedFor(1, true) == 2);
  const size_t connects = o.l.transport.connects.size();
  o.l.links->openLanes();
  CHECK(o.l.links->openLaneCount() == 2);
  CHECK(o.l.transport.connects.size() == connects);
  CHECK(o.lane_hellos[4] == 111);
  CHECK(o.peerUsedFor(1, true) == 4);
  // Nothing more to open.
  o.l.links->openLanes();
  o.l.links->wantLanes();
  CHECK(o.lane_hellos[4] == 111);
  CHECK(o.lane_hellos.size() == 2);
}

TEST_CASE("server links: no push lane until one is wanted, with ZPS_PUSH_LANE=0, or when refused", "[server_links]") {
  LaneOffer o;
  bool wanted = true;
  SECTION("no scheduled tensor yet") { wanted = false; }
  SECTION("ZPS_PUSH_LANE=0") { o.l.config.push_lane = false; }
  SECTION("the server refuses the lane") { o.refuse_lanes = true; }
  if (wanted)
    o.l.links->wantLanes();
  else
    o.l.links->openLanes();  // after a recovery
  CHECK(o.l.links->openLaneCount() == 0);
  CHECK(o.peerUsedFor(0, true) == 1);
  CHECK(o.peerUsedFor(1, true) == 2);
  if (o.refuse_lanes) CHECK(o.lane_hellos.size() == 2);
  if (!o.refuse_lanes) CHECK(o.l.transport.connects.size() == 2);
  CHECK(o.l.links->receiveFrom(0, true, std::chrono::steady_clock::now() + 1s, [] { return true; }));
}

}  // namespace
}  // namespace zps
