// Peers without the job's token try to make the scheduler and a server hold memory: unfinished
// multi-part messages, a large frame sent slowly, idle connections, wrong-token clients, and
// registrations whose error replies are never read. The attacked nodes' RSS growth is printed and
// bounded, idle connections are closed at the handshake deadline, and a real job still sums exactly.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/auth.h"
#include "ps/node/http_server.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "tests/integration/attack_peers.h"
#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;
namespace pb = zps::pb;

namespace {

using namespace zps::testing::attack;  // NOLINT: the attacking peers and the RSS watch

const char* kToken = "memory-attack-test-token-0123456789";

int serverPortFromLog(Cluster& c, int sched) {
  std::smatch m;
  std::regex re("registered server 0 \\(127\\.0\\.0\\.1:(\\d+)");
  REQUIRE(c.waitForLog(sched, "registered server 0", 30s));
  std::string log = c.log(sched);
  REQUIRE(std::regex_search(log, m, re));
  return std::stoi(m[1]);
}

size_t countLines(const std::string& log, const std::string& text) {
  size_t n = 0;
  for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("memory attack: peers without the token are refused at the handshake, and RSS stays bounded") {
  Cluster c(1, 1);
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  int sched = c.startScheduler();
  int server = c.startServer();
  int server_port = serverPortFromLog(c, sched);
  std::this_thread::sleep_for(500ms);  // let start-up allocations settle before the baselines
  RssWatch sched_rss(c.pid(sched)), server_rss(c.pid(server));

  constexpr int kIdle = 100;
  auto attack_start = std::chrono::steady_clock::now();
  RawAttack raw_sched(c.port(), kIdle), raw_server(server_port, kIdle);
  ZmqAttack zmq_sched(c.port()), zmq_server(server_port);

  std::this_thread::sleep_for(4s);
  int w = c.startWorker(0, {"check", "--rounds", "20", "--sizes", "1,4K,1M+3"});
  REQUIRE(c.waitExit(w, 90s) == 0);
  CHECK(contains(c.log(w), " 0 wrong"));

  // Idle connections outlive no handshake deadline (10 s) by much.
  std::this_thread::sleep_until(attack_start + 13s);
  int sched_closed = raw_sched.idleClosed(), server_closed = raw_server.idleClosed();
  raw_sched.stop();
  raw_server.stop();
  sched_rss.stop();
  server_rss.stop();
  c.expectAllExitZero(60s);

  double sent_mb = static_cast<double>(raw_sched.sent() + raw_server.sent()) / kMiB;
  std::printf(
      "memory attack (token set): raw bytes sent %.1f MiB; scheduler RSS %.1f MiB +%.1f MiB; server RSS %.1f MiB "
      "+%.1f MiB (server includes the job's own data); idle connections closed %d/%d and %d/%d\n",
      sent_mb, sched_rss.baseline() / double(kMiB), sched_rss.growth() / double(kMiB),
      server_rss.baseline() / double(kMiB), server_rss.growth() / double(kMiB), sched_closed, raw_sched.idleOpened(),
      server_closed, raw_server.idleOpened());
  CHECK(raw_sched.idleOpened() == kIdle);
  CHECK(sched_closed == raw_sched.idleOpened());
  CHECK(server_closed == raw_server.idleOpened());
  CHECK(sched_rss.growth() < 24 * kMiB);
  CHECK(server_rss.growth() < 64 * kMiB);
  // Refusals are logged, but rate-limited (10 lines a minute, then a count).
  std::string slog = c.log(sched);
  CHECK(contains(slog, "refused a node"));
  CHECK(countLines(slog, "refused a node") <= 12);
}

TEST_CASE("memory attack: an open job drops the replies of a peer that never reads them") {
  Cluster c(1, 1);
  int sched = c.startScheduler();
  std::this_thread::sleep_for(500ms);
  RssWatch sched_rss(c.pid(sched));
  void* ctx = zmq_ctx_new();
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 0, rcvbuf = 4096, hwm = 1;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_setsockopt(s, ZMQ_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
  std::string ep = "tcp://127.0.0.1:" + std::to_string(c.port());
  REQUIRE(zmq_connect(s, ep.c_str()) == 0);
  // Registrations the scheduler refuses (wrong protocol), each answered with an error it never reads.
  pb::Envelope e;
  auto* r = e.mutable_control()->mutable_register_();
  r->set_magic(0xdeadbeef);
  r->set_role(pb::WORKER);
  r->set_host(std::string(100, 'h'));
  std::string bad = e.SerializeAsString();
  constexpr int kSent = 200000;
  for (int i = 0; i < kSent; ++i) zmq_send(s, bad.data(), bad.size(), 0);
  std::this_thread::sleep_for(3s);
  sched_rss.stop();
  int server = c.startServer();
  int w = c.startWorker(0, {"check", "--rounds", "5"});
  c.expectAllExitZero(60s);
  CHECK(contains(c.log(w), " 0 wrong"));
  (void)server;
  zmq_close(s);
  zmq_ctx_term(ctx);
  std::string slog = c.log(sched);
  std::printf(
      "memory attack (open job): %d unread refusals of %zu bytes; scheduler RSS %.1f MiB +%.1f MiB; "
      "%zu refusal lines logged\n",
      kSent, bad.size(), sched_rss.baseline() / double(kMiB), sched_rss.growth() / double(kMiB),
      countLines(slog, "refused a node"));
  CHECK(sched_rss.growth() < 24 * kMiB);
  CHECK(countLines(slog, "refused a node") <= 12);
}

// A raw ZMTP 3.0 client that completes a PLAIN handshake with `password` (as a node of the job would)
// and then sends `frames` one-byte frames of a message that never ends. Returns the frames written:
// 0 when the handshake was refused.
size_t plainUnfinishedFrames(int port, const std::string& password, size_t frames) {
  int fd = tcpConnect(port);
  if (fd < 0) return 0;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  auto sendAll = [&](const std::string& bytes) {
    return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  };
  // Reads one command frame (flags 4 or 6) and returns its body; "" on a close or a timeout.
  auto readCommand = [&]() -> std::string {
    unsigned char head[9];
    if (recv(fd, head, 2, MSG_WAITALL) != 2) return "";
    uint64_t size = head[1];
    if (head[0] & 2) {
      if (recv(fd, head + 2, 7, MSG_WAITALL) != 7) return "";
      size = 0;
      for (int i = 1; i < 9; ++i) size = (size << 8) | head[i];
    }
    if (size > 4096) return "";
    std::string body(size, '\0');
    if (size > 0 && recv(fd, body.data(), size, MSG_WAITALL) != static_cast<ssize_t>(size)) return "";
    return body;
  };
  char theirs[64];
  const std::string user = "zps";
  const std::string hello =
      std::string("\x05HELLO") + static_cast<char>(user.size()) + user + static_cast<char>(password.size()) + password;
  const std::string initiate =
      std::string("\x08INITIATE") + "\x0bSocket-Type" + std::string("\0\0\0\x06", 4) + "DEALER";
  size_t sent = 0;
  if (sendAll(greeting("PLAIN")) && recv(fd, theirs, 64, MSG_WAITALL) == 64 &&
      sendAll(std::string(1, '\x04') + static_cast<char>(hello.size()) + hello) &&
      readCommand().rfind("\x07WELCOME", 0) == 0 &&
      sendAll(std::string(1, '\x04') + static_cast<char>(initiate.size()) + initiate) &&
      readCommand().rfind("\x05READY", 0) == 0) {
    const std::string frame("\x01\x01f", 3);  // more, 1 byte, "f"
    std::string batch;
    for (int i = 0; i < 4096; ++i) batch += frame;
    while (sent < frames && sendAll(batch)) sent += 4096;
  }
  close(fd);
  return sent;
}

TEST_CASE("memory attack: a peer replaying the PLAIN credential gets no frame into the scheduler") {
  // The data connections' PLAIN password is visible on the wire; the scheduler's link uses CurveZMQ
  // with a token, so that password does not get a peer past its handshake, where libzmq would buffer
  // every frame of a message that never ends (2 M one-byte frames took about 130 MB before).
  Cluster c(1, 1);
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  int sched = c.startScheduler();
  REQUIRE(c.waitForLog(sched, "scheduler listening", 30s));
  std::this_thread::sleep_for(500ms);
  RssWatch sched_rss(c.pid(sched));
  zps::TransportOptions options;
  zps::applyTransportSecurity(zps::Config(), zps::Authenticator::withToken(kToken), &options);
  REQUIRE(!options.handshake_password.empty());
  constexpr size_t kFrames = 2'000'000;
  const size_t sent = plainUnfinishedFrames(c.port(), options.handshake_password, kFrames);
  std::this_thread::sleep_for(2s);
  sched_rss.stop();
  c.startServer();
  int w = c.startWorker(0, {"check", "--rounds", "3", "--sizes", "4K"});
  c.expectAllExitZero(60s);
  CHECK(contains(c.log(w), " 0 wrong"));
  std::printf(
      "memory attack (PLAIN credential replayed at the scheduler): %zu of %zu unfinished frames written; "
      "scheduler RSS %.1f MiB +%.1f MiB\n",
      sent, kFrames, sched_rss.baseline() / double(kMiB), sched_rss.growth() / double(kMiB));
  CHECK(sent == 0);
  CHECK(sched_rss.growth() < 24 * kMiB);
}

namespace {

// The value of metric `name` (the sum over its labels) in a node's /metrics; -1 when unreachable.
double metricSum(int port, const std::string& name) {
  auto r = zps::httpGet("127.0.0.1", port, "/metrics", 5s);
  if (!r.ok() || r->first != 200) return -1;
  std::istringstream lines(r->second);
  double sum = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name, 0) != 0 || (line[name.size()] != ' ' && line[name.size()] != '{')) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// A raw DEALER that never reads: a small receive buffer and high-water mark, so that what a node
// sends it piles up in the node.
void* neverReadingDealer(void* ctx, int port) {
  void* s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 0, rcvbuf = 4096, rcvhwm = 1, sndhwm = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
  zmq_setsockopt(s, ZMQ_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  zmq_setsockopt(s, ZMQ_RCVHWM, &rcvhwm, sizeof(rcvhwm));
  zmq_setsockopt(s, ZMQ_SNDHWM, &sndhwm, sizeof(sndhwm));
  std::string ep = "tcp://127.0.0.1:" + std::to_string(port);
  REQUIRE(zmq_connect(s, ep.c_str()) == 0);
  return s;
}

std::string dataMessage(const pb::Data& d) { return std::string(zps::wire::encodeData(d)[0].view()); }

}  // namespace

TEST_CASE("memory attack: an open job's server bounds the replies of strangers that never read them") {
  // Without a token anyone may talk to a server. Each request is answered (an error: no HELLO, or an
  // undeclared key); a peer that never reads made the server queue every answer (3 M PULLs took a
  // server from 13 to 620 MB). The listener now queues at most a bounded number per connection and
  // drops the rest, counted.
  Cluster c(1, 1);
  int sched = c.startScheduler();
  const int metrics_port = zps::proc::pickFreeTcpPort();
  int server = c.startServer({{"ZPS_METRICS_PORT", std::to_string(metrics_port)}});
  int server_port = serverPortFromLog(c, sched);
  // A server handles data messages once the job runs: a real worker runs through the attack, and
  // ends (SIGTERM: a goodbye, exit 0) once the attack was handled.
  int w = c.startWorker(0, {"check", "--rounds", "1000000", "--sizes", "4K"});
  REQUIRE(c.waitForLog(server, "ready on", 30s));
  std::this_thread::sleep_for(500ms);
  RssWatch server_rss(c.pid(server));
  void* ctx = zmq_ctx_new();
  void* without_hello = neverReadingDealer(ctx, server_port);
  void* with_hello = neverReadingDealer(ctx, server_port);
  pb::Data hello;
  hello.set_request_id(1);
  hello.mutable_hello()->set_magic(zps::wire::kMagic);
  hello.mutable_hello()->set_worker_rank(0);
  hello.mutable_hello()->set_local_rank(77);  // a local rank of its own: the real worker 0 can still connect
  const std::string hello_bytes = dataMessage(hello);
  REQUIRE(zmq_send(with_hello, hello_bytes.data(), hello_bytes.size(), 0) == static_cast<int>(hello_bytes.size()));
  pb::Data pull;
  pull.mutable_tensor()->set_op(pb::OP_PULL);
  pull.mutable_tensor()->set_key(12345);
  pull.mutable_tensor()->set_round(1);
  constexpr int kPerConnection = 500'000;
  const auto attack_start = std::chrono::steady_clock::now();
  for (int i = 0; i < kPerConnection; ++i) {
    pull.set_request_id(2 + static_cast<uint64_t>(i));
    const std::string bytes = dataMessage(pull);
    zmq_send(without_hello, bytes.data(), bytes.size(), 0);
    zmq_send(with_hello, bytes.data(), bytes.size(), 0);
  }
  // Handled: the requests without a HELLO count as malformed, those with one as pulls of worker 0.
  bool handled = false;
  for (auto until = std::chrono::steady_clock::now() + 120s; !handled && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(200ms);
    handled = metricSum(metrics_port, "zps_malformed_messages_total") >= kPerConnection &&
              metricSum(metrics_port, "zps_server_pull_messages_total") >= kPerConnection;
  }
  const double dropped_metric = metricSum(metrics_port, "zps_dropped_replies_total");
  const double attack_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - attack_start).count();
  server_rss.stop();
  const bool worker_ran_through = c.running(w);
  c.signal(w, SIGTERM);
  CHECK(c.waitExit(w, 60s) == 0);
  c.waitAll(60s);
  zmq_close(without_hello);
  zmq_close(with_hello);
  zmq_ctx_term(ctx);
  const std::string log = c.log(server);
  std::smatch m;
  const bool counted = std::regex_search(log, m, std::regex("(\\d+) replies to peers that did not read them"));
  std::printf(
      "memory attack (open job, server): 2 x %d unread requests handled in %.1f s; server RSS %.1f MiB +%.1f MiB; "
      "%s replies dropped (metric %.0f); %zu drop lines logged\n",
      kPerConnection, attack_s, server_rss.baseline() / double(kMiB), server_rss.growth() / double(kMiB),
      counted ? m[1].str().c_str() : "no", dropped_metric, countLines(log, "does not read its replies"));
  REQUIRE(handled);
  CHECK(worker_ran_through);
  CHECK(!contains(c.log(w), "wrong value"));
  CHECK(dropped_metric > 0);
  CHECK(server_rss.growth() < 64 * kMiB);
  REQUIRE(counted);
  CHECK(std::stoull(m[1]) > 0);
  CHECK(countLines(log, "does not read its replies") <= 12);
}

TEST_CASE("memory attack: a server's PLAIN password seen on the wire opens no other server") {
  // Past a server's handshake libzmq buffers every frame of a message that never ends, and a PLAIN
  // password is visible on the wire. Every server process now listens with a password of its own
  // (an HMAC of the token over its random data salt): one seen at server 0 opens neither server 1
  // nor any server of a later job, and the token-wide password that opened every server before
  // opens none.
  Cluster c(2, 1);
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  int sched = c.startScheduler();
  int server0 = c.startServer();
  int server1 = c.startServer();
  // The job runs through the probe; the worker ends it (SIGTERM: a goodbye, exit 0) afterwards.
  int w = c.startWorker(0, {"check", "--rounds", "1000000", "--sizes", "4K"});
  REQUIRE(c.waitForLog(server0, "ready on", 30s));
  REQUIRE(c.waitForLog(server1, "ready on", 30s));
  // In the job before the probes: a SIGTERM while the worker still connects ends it with exit 1, and
  // on a loaded machine the probes can be over before it has connected.
  REQUIRE(c.waitForLog(w, "declared", 30s));
  // The scheduler's registration lines give each server's port and pid.
  const std::string slog = c.log(sched);
  std::map<int, int> port_of_pid;
  const std::regex registered("registered server (\\d) \\(127\\.0\\.0\\.1:(\\d+), pid (\\d+)");
  for (auto it = std::sregex_iterator(slog.begin(), slog.end(), registered); it != std::sregex_iterator(); ++it)
    port_of_pid[std::stoi((*it)[3])] = std::stoi((*it)[2]);
  REQUIRE(port_of_pid.count(c.pid(server0)) == 1);
  REQUIRE(port_of_pid.count(c.pid(server1)) == 1);
  const int port0 = port_of_pid[c.pid(server0)], port1 = port_of_pid[c.pid(server1)];
  zps::TransportOptions token_wide;
  zps::applyTransportSecurity(zps::Config(), zps::Authenticator::withToken(kToken), &token_wide);
  const size_t token_wide_0 = plainUnfinishedFrames(port0, token_wide.handshake_password, 200'000);
  const size_t token_wide_1 = plainUnfinishedFrames(port1, token_wide.handshake_password, 200'000);
  std::printf(
      "memory attack (the token-wide PLAIN password at a server): frames written to servers 0 and 1: %zu, %zu\n",
      token_wide_0, token_wide_1);
  CHECK(token_wide_0 == 0);
  CHECK(token_wide_1 == 0);

  const std::string password0 = zps::testing::serverDataPassword(c.log(server0), kToken);
  REQUIRE(!password0.empty());
  const size_t at_other = plainUnfinishedFrames(port1, password0, 200'000);
  const size_t at_own = plainUnfinishedFrames(port0, password0, 4096);  // the same server: still opens
  const bool both_ran_through = c.running(server0) && c.running(server1) && c.running(w);
  c.signal(w, SIGTERM);
  CHECK(c.waitExit(w, 60s) == 0);
  c.waitAll(60s);
  CHECK(!contains(c.log(w), "wrong value"));
  std::printf("memory attack (server 0's PLAIN password replayed): frames written to server 0 %zu, to server 1 %zu\n",
              at_own, at_other);
  CHECK(both_ran_through);
  CHECK(at_own == 4096);
  CHECK(at_other == 0);
}
