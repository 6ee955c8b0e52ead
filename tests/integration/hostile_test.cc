// A raw ZeroMQ client throws garbage at the scheduler and a server; afterwards they still run a real job
// to exact sums, and their malformed-message counters have risen.
#include <zmq.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <regex>
#include <thread>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::wire::commandOf;
using namespace std::chrono_literals;
namespace pb = zps::pb;

namespace {

// A DEALER that sends multi-frame messages and reads replies with a deadline.
class RawClient {
 public:
  // `plain_password`: the job's ZeroMQ PLAIN password (a job with a token), else none.
  RawClient(void* ctx, int port, const std::string& plain_password = "") : socket_(zmq_socket(ctx, ZMQ_DEALER)) {
    int linger = 0;
    zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger));
    if (!plain_password.empty()) {
      zmq_setsockopt(socket_, ZMQ_PLAIN_USERNAME, "zps", 3);
      zmq_setsockopt(socket_, ZMQ_PLAIN_PASSWORD, plain_password.data(), plain_password.size());
    }
    std::string ep = "tcp://127.0.0.1:" + std::to_string(port);
    REQUIRE(zmq_connect(socket_, ep.c_str()) == 0);
  }
  ~RawClient() { zmq_close(socket_); }

  void send(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i)
      zmq_send(socket_, frames[i].data(), frames[i].size(), i + 1 < frames.size() ? ZMQ_SNDMORE : 0);
  }
  // The first frame of the next reply, or "" when none comes in time.
  std::string recv(std::chrono::milliseconds timeout) {
    zmq_pollitem_t item{socket_, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, static_cast<long>(timeout.count())) <= 0) return "";
    std::string first;
    bool more = true, is_first = true;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      zmq_msg_recv(&m, socket_, 0);
      if (is_first) first.assign(static_cast<char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
      is_first = false;
    }
    return first;
  }

 private:
  void* socket_;
};

std::string envelope(const pb::Control& c) {
  pb::Envelope e;
  *e.mutable_control() = c;
  return e.SerializeAsString();
}

// A data message's first frame as a worker sends it (protocol version 0 is sent as ours).
std::string envelope(const pb::Data& d) { return std::string(zps::wire::encodeData(d)[0].view()); }

// The server's answer (its first frame), read as a worker reads it.
pb::Data answerOf(const std::string& frame) {
  auto decoded = zps::wire::decode({zps::Blob::fromString(frame)}, zps::wire::Limits());
  REQUIRE(decoded.ok());
  REQUIRE(std::holds_alternative<zps::wire::DataMessage>(*decoded));
  return std::get<zps::wire::DataMessage>(*decoded).data;
}

// A valid HELLO from worker `worker_rank` under local rank `local_rank` (a rank of its own, so the real
// worker with that rank is not disturbed).
pb::Data hello(int worker_rank, int local_rank) {
  pb::Data d;
  d.set_request_id(1);
  d.set_protocol_version(zps::wire::kProtocolVersion);
  d.mutable_hello()->set_magic(zps::wire::kMagic);
  d.mutable_hello()->set_worker_rank(worker_rank);
  d.mutable_hello()->set_local_rank(local_rank);
  return d;
}

// A dense float32 push of `num_elements` of key `key` in round `round`.
pb::Data pushOf(uint64_t request_id, uint64_t key, uint64_t round, uint64_t num_elements) {
  pb::Data d;
  d.set_request_id(request_id);
  pb::Tensor* t = d.mutable_tensor();
  t->set_op(pb::OP_PUSH);
  t->set_key(key);
  t->set_round(round);
  t->set_num_elements(num_elements);
  return d;
}

// A sum key's DECLARE: `num_elements` float32 named `name`.
pb::Data declareOf(uint64_t request_id, uint64_t key, uint64_t num_elements, const std::string& name) {
  pb::Data d;
  d.set_request_id(request_id);
  pb::Declare* b = d.mutable_declare();
  b->set_key(key);
  b->set_dtype(static_cast<uint32_t>(zps::DType::kFloat32));
  b->set_num_elements(num_elements);
  b->set_name(name);
  return d;
}

std::string randomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& ch : s) ch = static_cast<char>(rng());
  return s;
}

uint64_t counterIn(const std::string& log, const std::string& who) {
  std::smatch m;
  std::regex re(who + ": (\\d+) malformed or unexpected messages were dropped");
  if (!std::regex_search(log, m, re)) return 0;
  return std::stoull(m[1]);
}

// Server 0's data port, from the scheduler's registration line, once worker 0 has registered too.
int serverPort(Cluster& c, int sched) {
  std::smatch m;
  std::regex re("registered server 0 \\(127\\.0\\.0\\.1:(\\d+)");
  auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string log;
  while (std::chrono::steady_clock::now() < deadline) {
    log = c.log(sched);
    if (std::regex_search(log, m, re) && contains(log, "registered worker 0")) break;
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(std::regex_search(log, m, re));
  return std::stoi(m[1]);
}

}  // namespace

TEST_CASE("garbage from a raw client costs messages, not the job") {
  Cluster c(1, 2);
  int sched = c.startScheduler();
  int server = c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "10", "--sizes", "1,4K,1M+3"});
  int server_port = serverPort(c, sched);

  void* ctx = zmq_ctx_new();
  std::mt19937 rng(42);
  {
    RawClient s(ctx, c.port());
    // Random bytes, a truncated envelope, empty and many frames, a body-less control message.
    for (int i = 0; i < 50; ++i) s.send({randomBytes(rng, 1 + rng() % 200)});
    pb::Control hb;
    hb.mutable_heartbeat()->set_sent_unix_ms(1);
    std::string good = envelope(hb);
    s.send({good.substr(0, good.size() / 2)});
    s.send({""});
    s.send(std::vector<std::string>(20, "x"));
    s.send({envelope(pb::Control())});
    // A barrier with an out-of-range group, and one from an unregistered peer.
    pb::Control bar;
    bar.mutable_barrier()->set_group(static_cast<pb::BarrierGroup>(99));
    s.send({envelope(bar)});
    bar.mutable_barrier()->set_group(pb::GROUP_ALL);
    bar.mutable_barrier()->set_sequence(1);
    s.send({envelope(bar)});
    // A registration of protocol version 1 (and a wrong magic), and one claiming worker 0's rank.
    pb::Control reg;
    auto* r = reg.mutable_register_();
    r->set_magic(0xdeadbeef);
    r->set_protocol_version(1);
    r->set_role(pb::WORKER);
    r->set_requested_rank(1);
    r->set_expected_servers(1);
    r->set_expected_workers(2);
    s.send({envelope(reg)});
    std::string reply = s.recv(5s);
    REQUIRE_FALSE(reply.empty());
    pb::Envelope e;
    REQUIRE(e.ParseFromString(reply));
    CHECK_FALSE(e.control().register_reply().accepted());
    CHECK(contains(e.control().register_reply().error(), "protocol mismatch"));
    CHECK(contains(e.control().register_reply().error(), "version 1, scheduler speaks"));  // both versions
    CHECK(contains(e.control().register_reply().error(), "version 2"));
    r->set_magic(zps::wire::kMagic);
    r->set_protocol_version(zps::wire::kProtocolVersion);
    r->set_requested_rank(0);
    s.send({envelope(reg)});
    reply = s.recv(5s);
    REQUIRE_FALSE(reply.empty());
    REQUIRE(e.ParseFromString(reply));
    CHECK_FALSE(e.control().register_reply().accepted());
    CHECK(contains(e.control().register_reply().error(), "worker rank 0 (from ) is already taken"));
  }
  int w1 = -1;
  {
    RawClient d(ctx, server_port);
    for (int i = 0; i < 50; ++i) d.send({randomBytes(rng, 1 + rng() % 200), randomBytes(rng, rng() % 64)});
    // A push before HELLO, a HELLO with a bad magic and one with an out-of-range rank.
    const pb::Data push = pushOf(0, 0, 1, 4);
    d.send({envelope(push), std::string(16, '\0')});
    pb::Data bad_hello;
    bad_hello.mutable_hello()->set_magic(1);
    d.send({std::string(zps::wire::encodeBody(bad_hello)[0].view())});  // as built: no protocol version
    bad_hello.set_protocol_version(zps::wire::kProtocolVersion);
    bad_hello.mutable_hello()->set_magic(zps::wire::kMagic);
    bad_hello.mutable_hello()->set_worker_rank(99);
    d.send({envelope(bad_hello)});
    // A message without a body, an unknown dtype, lengths that do not match, a truncated payload.
    d.send({envelope(pb::Data())});
    pb::Data bad = push;
    bad.mutable_tensor()->set_dtype(42);
    d.send({envelope(bad), std::string(16, '\0')});
    bad = push;
    d.send({envelope(bad), std::string(15, '\0')});
    bad.mutable_tensor()->set_num_elements(~0ull);
    d.send({envelope(bad), std::string(8, '\0')});
    // The server serves data once the job has started: then it answers what it can with an error.
    w1 = c.startWorker(1, {"check", "--rounds", "10", "--sizes", "1,4K,1M+3"});
    std::string reply = d.recv(20s);
    REQUIRE_FALSE(reply.empty());
    const pb::Data answer = answerOf(reply);
    CHECK(commandOf(answer) == pb::CMD_ERROR);
    CHECK(contains(answer.error().text(), "HELLO"));
  }
  {
    // A worker of protocol version 1 hears, in its own framing, which versions the two speak.
    RawClient old(ctx, server_port);
    pb::Envelope v1;
    v1.mutable_version1_data()->set_command(pb::CMD_HELLO);
    v1.mutable_version1_data()->set_request_id(5);
    v1.mutable_version1_data()->set_magic(zps::wire::kMagic);
    v1.mutable_version1_data()->set_protocol_version(1);
    old.send({v1.SerializeAsString()});
    pb::Envelope e;
    REQUIRE(e.ParseFromString(old.recv(20s)));
    REQUIRE(e.has_version1_data());
    CHECK(e.version1_data().command() == pb::CMD_ERROR);
    CHECK(e.version1_data().request_id() == 5);
    CHECK(contains(e.version1_data().error(), "peer speaks zps protocol version 1, this node speaks version 2"));
  }
  zmq_ctx_term(ctx);

  c.expectAllExitZero(120s);
  CHECK(contains(c.log(w0), " 0 wrong"));
  CHECK(contains(c.log(w1), " 0 wrong"));
  uint64_t sched_bad = counterIn(c.log(sched), "scheduler");
  uint64_t server_bad = counterIn(c.log(server), "server 0");
  std::printf("garbage client: scheduler dropped %llu malformed messages, server %llu\n",
              static_cast<unsigned long long>(sched_bad), static_cast<unsigned long long>(server_bad));
  CHECK(sched_bad >= 50);
  CHECK(server_bad >= 50);
  CHECK(contains(c.log(sched), "refused a node"));
}

// A peer that asks a server for more than ZPS_SERVER_MAX_BYTES (a huge key, a huge async key, a pull that
// would create a million rows) gets an error naming the cap; the server keeps serving the real job.
TEST_CASE("a server at its memory cap refuses new keys and rows and keeps serving the job") {
  Cluster c(1, 2);
  c.setEnv("ZPS_SERVER_MAX_BYTES", std::to_string(64 << 20));
  int sched = c.startScheduler();
  int server = c.startServer();
  c.startWorker(0, {"check", "--rounds", "1000", "--sizes", "1,4K,256K"});  // outlasts the probes below
  int server_port = serverPort(c, sched);
  c.startWorker(1, {"check", "--rounds", "1000", "--sizes", "1,4K,256K"});

  void* ctx = zmq_ctx_new();
  {
    RawClient d(ctx, server_port);
    // Worker 0's rank under a local rank of its own, so the real worker 0 is not disturbed.
    d.send({envelope(hello(0, 7))});
    REQUIRE(commandOf(answerOf(d.recv(20s))) == pb::CMD_REPLY);
    auto ask = [&](const pb::Data& request, const std::vector<std::string>& extra = {}) {
      std::vector<std::string> frames = {envelope(request)};
      frames.insert(frames.end(), extra.begin(), extra.end());
      d.send(frames);
      return answerOf(d.recv(20s));
    };
    // 16 MiB, held up to 7 times by a synchronous key of 2 workers.
    pb::Data declare = declareOf(2, uint64_t{1} << 50, 4 << 20, "too big");
    pb::Data r = ask(declare);
    CHECK(commandOf(r) == pb::CMD_ERROR);
    CHECK(contains(r.error().text(), "ZPS_SERVER_MAX_BYTES=67108864"));
    declare.set_request_id(3);
    declare.mutable_declare()->set_async(true);
    declare.mutable_declare()->set_num_elements(10 << 20);  // 40 MiB, twice for an async key
    r = ask(declare);
    CHECK(commandOf(r) == pb::CMD_ERROR);
    CHECK(contains(r.error().text(), "server memory cap reached"));
    // A small table is fine; a pull that would create a million rows of it is not.
    const uint64_t table_key = (uint64_t{1} << 50) + 1;
    pb::Data table = declareOf(4, table_key, 0, "rows");
    table.mutable_declare()->set_mode(pb::MODE_PARAM);
    table.mutable_declare()->set_row_dim(64);
    table.mutable_declare()->set_async(true);
    table.mutable_declare()->set_local_size(8);  // this client said HELLO as local rank 7: of a node of 8 at least
    table.mutable_declare()->mutable_optimizer()->set_lr(0.1f);
    r = ask(table);
    CHECK(commandOf(r) == pb::CMD_REPLY);
    pb::Data pull;
    pull.set_request_id(5);
    pull.mutable_rows()->set_key(table_key);
    pull.mutable_rows()->set_count(1 << 20);
    pull.mutable_rows()->set_row_dim(64);
    std::string keys((size_t{1} << 20) * 8, '\0');
    for (size_t i = 0; i < (size_t{1} << 20); ++i) std::memcpy(&keys[i * 8], &i, 8);
    r = ask(pull, {keys});
    CHECK(commandOf(r) == pb::CMD_ERROR);
    CHECK(contains(r.error().text(), "new rows of table 'rows'"));
    // A pull of a few rows still works.
    pull.set_request_id(6);
    pull.mutable_rows()->set_count(3);
    r = ask(pull, {keys.substr(0, 24)});
    CHECK(commandOf(r) == pb::CMD_REPLY);
    CHECK(r.reply().num_elements() == 3 * 64);
  }
  zmq_ctx_term(ctx);
  c.expectAllExitZero(120s);
  for (int w : {2, 3}) CHECK(contains(c.log(w), " 0 wrong"));
  CHECK(contains(c.log(server), "server memory cap reached"));
}

TEST_CASE("a bad compressed push gets an error reply, counts as malformed, and the job goes on") {
  Cluster c(1, 2);
  int sched = c.startScheduler();
  int server = c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "5", "--sizes", "4K"});
  const int server_port = serverPort(c, sched);
  void* ctx = zmq_ctx_new();
  int w1 = -1;
  {
    RawClient d(ctx, server_port);
    // A peer that joined properly (worker 1, a local rank of its own), then sends hostile pushes.
    d.send({envelope(hello(1, 7))});
    pb::Data push = pushOf(2, 0, 1, 4);
    push.mutable_tensor()->set_encoding(pb::ENCODING_SPARSE);
    push.mutable_tensor()->set_sparse_count(1);
    uint32_t entry[2] = {4, 0};  // index 4 of 4 elements
    d.send({envelope(push), std::string(reinterpret_cast<const char*>(entry), sizeof(entry))});
    push.set_request_id(3);
    push.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
    push.mutable_tensor()->set_sparse_count(0);
    d.send({envelope(push), std::string(16, '\0')});  // fp16 of 4 elements is 8 bytes
    w1 = c.startWorker(1, {"check", "--rounds", "5", "--sizes", "4K"});
    std::vector<std::string> errors;
    for (int i = 0; i < 3; ++i) {
      std::string reply = d.recv(20s);
      REQUIRE_FALSE(reply.empty());
      const pb::Data answer = answerOf(reply);
      if (answer.request_id() == 1) {
        CHECK(commandOf(answer) == pb::CMD_REPLY);
        continue;
      }
      CHECK(commandOf(answer) == pb::CMD_ERROR);
      errors.push_back(answer.error().text());
    }
    REQUIRE(errors.size() == 2);
    CHECK(contains(errors[0], "sparse index 4 at position 0 is not below 4 elements"));
    CHECK(contains(errors[1], "payload is 16 bytes but 4 x float32 ENCODING_FP16 needs 8"));
  }
  zmq_ctx_term(ctx);
  c.expectAllExitZero(60s);
  CHECK(contains(c.log(w0), " 0 wrong"));
  CHECK(contains(c.log(w1), " 0 wrong"));
  CHECK(counterIn(c.log(server), "server 0") >= 2);
}

// A push lane (ZPS_PUSH_LANE) is bound to the connection whose HELLO reply carried its token: a forged
// token, the token under another local rank, a token presented on its own connection and a token used
// twice are refused with a clear message; the one real lane HELLO is accepted. The job goes on.
TEST_CASE("a forged lane HELLO is refused, and a lane opens once per connection") {
  Cluster c(1, 2);
  int sched = c.startScheduler();
  c.startServer();
  c.startWorker(0, {"check", "--rounds", "50", "--sizes", "1,4K"});
  int server_port = serverPort(c, sched);
  c.startWorker(1, {"check", "--rounds", "50", "--sizes", "1,4K"});

  void* ctx = zmq_ctx_new();
  {
    auto ask = [](RawClient& client, const pb::Data& request) {
      client.send({envelope(request)});
      return answerOf(client.recv(20s));
    };
    // Worker 0's rank under a local rank of its own, so the real worker 0 is not disturbed.
    RawClient first(ctx, server_port);
    pb::Data r = ask(first, hello(0, 7));
    REQUIRE(commandOf(r) == pb::CMD_REPLY);
    CHECK(r.hello_reply().accepts_fused());  // workers fuse only for servers that say so
    const uint64_t token = r.hello_reply().lane_token();
    REQUIRE(token != 0);
    auto laneHello = [&](int local_rank, uint64_t lane_token) {
      pb::Data h = hello(0, local_rank);
      h.mutable_hello()->set_lane_token(lane_token);
      return h;
    };
    auto refusedOn = [&](RawClient& client, const pb::Data& h) {
      pb::Data answer = ask(client, h);
      CHECK(commandOf(answer) == pb::CMD_ERROR);
      CHECK(contains(answer.error().text(), "unknown lane token"));
      CHECK(contains(answer.error().text(), "worker 0 local rank " + std::to_string(h.hello().local_rank())));
    };
    {
      RawClient forged(ctx, server_port);
      refusedOn(forged, laneHello(7, token + 1));
    }
    {
      RawClient other_local_rank(ctx, server_port);
      refusedOn(other_local_rank, laneHello(6, token));
    }
    refusedOn(first, laneHello(7, token));  // a connection cannot be its own lane
    RawClient lane(ctx, server_port);
    r = ask(lane, laneHello(7, token));
    CHECK(commandOf(r) == pb::CMD_REPLY);
    CHECK(r.hello_reply().lane_token() == 0);  // a lane opens no lane
    CHECK(r.hello_reply().upgrade_token() == 0);
    RawClient again(ctx, server_port);
    refusedOn(again, laneHello(7, token));  // once per connection
  }
  zmq_ctx_term(ctx);
  c.expectAllExitZero(120s);
  for (int w : {2, 3}) CHECK(contains(c.log(w), " 0 wrong"));
}

TEST_CASE("with a token, a resent HELLO is answered again on its connection and refused from another") {
  const std::string token = "hello-replay-test-token-0123456789";
  Cluster c(1, 1);
  c.setEnv("ZPS_AUTH_TOKEN", token);
  int sched = c.startScheduler();
  int server = c.startServer();
  c.startWorker(0, {"check", "--rounds", "500", "--sizes", "1,4K"});
  int server_port = serverPort(c, sched);
  // What a node of the job would send: the server's PLAIN password and a signed HELLO (local rank 7
  // of worker 0, so that the real worker 0 is not disturbed).
  const zps::Authenticator auth = zps::Authenticator::withToken(token);
  REQUIRE(c.waitForLog(server, "data salt", 30s));
  const std::string password = zps::testing::serverDataPassword(c.log(server), token);
  pb::Data h = hello(0, 7);
  pb::Hello* signed_hello = h.mutable_hello();
  signed_hello->set_auth_nonce(zps::Authenticator::newNonce());
  signed_hello->set_auth_time_ms(zps::Authenticator::nowMs());
  signed_hello->set_auth_mac(auth.mac(zps::kHelloContext, zps::helloMacInput(*signed_hello, h.protocol_version())));

  void* ctx = zmq_ctx_new();
  {
    auto ask = [](RawClient& client, const pb::Data& request) {
      client.send({envelope(request)});
      return answerOf(client.recv(20s));
    };
    RawClient first(ctx, server_port, password);
    const pb::Data accepted = ask(first, h);
    REQUIRE(commandOf(accepted) == pb::CMD_REPLY);
    CHECK(auth.verify(zps::kHelloReplyContext, h.hello().auth_nonce(), accepted.hello_reply().auth_mac()));
    // Its reply was lost: the same HELLO again on the same connection gets the same answer.
    const pb::Data again = ask(first, h);
    CHECK(commandOf(again) == pb::CMD_REPLY);
    CHECK(again.SerializeAsString() == accepted.SerializeAsString());
    // The same bytes from another connection are a replay.
    RawClient other(ctx, server_port, password);
    const pb::Data replayed = ask(other, h);
    CHECK(commandOf(replayed) == pb::CMD_ERROR);
    CHECK(contains(replayed.error().text(), "replayed nonce"));
  }
  zmq_ctx_term(ctx);
  c.expectAllExitZero(120s);
  CHECK(contains(c.log(2), " 0 wrong"));
}
