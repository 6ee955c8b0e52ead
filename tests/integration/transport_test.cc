// The ZeroMQ transport on loopback within one process: onMessage() takes over from recv(), first with
// the messages already queued, in order, then with new ones; a caller receives on its own connection
// (receiveOn), keeps it parked between requests, and hands it back to the I/O thread.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/transport/transport.h"

using namespace std::chrono_literals;

namespace zps {
namespace {

TEST_CASE("transport: onMessage gets the queued messages first, in order, then every new one") {
  TransportOptions options;
  auto server = makeZmqTransport(options);
  auto client = makeZmqTransport(options);
  auto port = server->listen("127.0.0.1", 0);
  REQUIRE(port.ok());
  auto peer = client->connect(Endpoint::tcp("127.0.0.1", *port));
  REQUIRE(peer.ok());
  for (int i = 0; i < 3; ++i) REQUIRE(client->send(*peer, {Blob::fromString("m" + std::to_string(i))}).ok());
  // The first message comes through recv(); the next two wait in its queue for the handler.
  auto first = server->recv(std::chrono::steady_clock::now() + 10s);
  REQUIRE(first.ok());
  CHECK(first->frames[0].view() == "m0");
  std::this_thread::sleep_for(200ms);  // m1 and m2 arrive and are queued

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> got;
  server->onMessage([&](TransportMessage msg) {
    std::lock_guard<std::mutex> lock(mu);
    got.emplace_back(msg.frames[0].view());
    cv.notify_all();
  });
  for (int i = 3; i < 5; ++i) REQUIRE(client->send(*peer, {Blob::fromString("m" + std::to_string(i))}).ok());
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 10s, [&] { return got.size() == 4; }));
    CHECK(got == std::vector<std::string>{"m1", "m2", "m3", "m4"});
  }
  CHECK(server->recv(std::chrono::steady_clock::now() + 100ms).status().code() == StatusCode::kDeadlineExceeded);
  client->close();
  server->close();
}

TEST_CASE("transport: a listener with an ipc name is also reachable over ipc://@name") {
  TransportOptions listening;
  listening.ipc_name = "zps-transport-test-" + std::to_string(::getpid());
  auto server = makeZmqTransport(listening);
  auto client = makeZmqTransport(TransportOptions{});
  REQUIRE(server->listen("127.0.0.1", 0).ok());
  CHECK(client->connect(Endpoint::ipc("Bad/Name")).status().code() == StatusCode::kInvalidArgument);
  auto peer = client->connect(Endpoint::ipc(listening.ipc_name));
  REQUIRE(peer.ok());
  REQUIRE(client->send(*peer, {Blob::fromString("over ipc")}).ok());
  auto got = server->recv(std::chrono::steady_clock::now() + 10s);
  REQUIRE(got.ok());
  CHECK(got->frames[0].view() == "over ipc");
  client->close();
  server->close();
}

TEST_CASE("transport: large frames over ipc arrive intact both ways, through shared memory once agreed") {
  TransportOptions listening;
  listening.ipc_name = "zps-transport-shm-" + std::to_string(::getpid());
  auto server = makeZmqTransport(listening);
  auto client = makeZmqTransport(TransportOptions{});
  REQUIRE(server->listen("127.0.0.1", 0).ok());
  auto peer = client->connect(Endpoint::ipc(listening.ipc_name));
  REQUIRE(peer.ok());
  auto payload = [](int round, size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(round * 7 + i * 13);
    return s;
  };
  // Request-reply rounds of 5 MiB frames (the first ones inline while the link agrees, the rest through
  // the arenas) and 100 rounds more than the 64 MiB arena holds at once.
  for (int round = 0; round < 100; ++round) {
    REQUIRE(client->send(*peer, {Blob::fromString("req"), Blob::fromString(payload(round, 5 << 20))}).ok());
    auto got = server->recv(std::chrono::steady_clock::now() + 10s);
    REQUIRE(got.ok());
    REQUIRE(got->frames.size() == 2);
    REQUIRE(got->frames[0].view() == "req");
    REQUIRE(got->frames[1].view() == payload(round, 5 << 20));
    REQUIRE(server->send(got->peer, {Blob::fromString("rep"), Blob::fromString(payload(round + 1, 3 << 20))}).ok());
    auto reply = client->recv(std::chrono::steady_clock::now() + 10s);
    REQUIRE(reply.ok());
    REQUIRE(reply->frames.size() == 2);
    REQUIRE(reply->frames[1].view() == payload(round + 1, 3 << 20));
  }
  // Both arenas (the client's and the server's) are mapped twice here: by their sender and their receiver.
  std::ifstream maps("/proc/self/maps");
  int arena_mappings = 0;
  for (std::string line; std::getline(maps, line);)
    arena_mappings += line.find("/memfd:zps-arena") != std::string::npos;
  CHECK(arena_mappings >= 4);
  client->close();
  server->close();
}

// What a client's handler saw: each message and the thread that handled it.
struct Handled {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::thread::id>> messages;

  void add(const TransportMessage& msg) {
    std::lock_guard<std::mutex> lock(mu);
    messages.emplace_back(msg.frames[0].view(), std::this_thread::get_id());
    cv.notify_all();
  }
  bool has(size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    return messages.size() >= n;
  }
};

// Waits until a caller can receive on `peer` (the client's I/O thread installed its handler and made
// the connection); under load that can take longer than any fixed sleep.
bool untilReceivable(Transport& client, PeerId peer) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    if (client.receiveOn(peer, std::chrono::steady_clock::now() + 1ms, [] { return true; })) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Echoes each message's first frame; a message with a second frame is held until a message "go".
void echoWithHold(Transport& server) {
  auto held = std::make_shared<std::vector<TransportMessage>>();
  server.onMessage([&server, held](TransportMessage msg) {
    if (msg.frames.size() == 2) {
      held->push_back(std::move(msg));
      return;
    }
    if (msg.frames[0].view() != "go") {
      (void)server.send(msg.peer, std::move(msg.frames));
      return;
    }
    for (TransportMessage& h : *held) (void)server.send(h.peer, {h.frames[0]});
    held->clear();
  });
}

// A server that echoes (holding replies until "go": echoWithHold) and a client connected to it.
struct EchoPair {
  std::unique_ptr<Transport> server = makeZmqTransport(TransportOptions{});
  std::unique_ptr<Transport> client = makeZmqTransport(TransportOptions{});
  StatusOr<PeerId> peer = connect(*server, *client);

  static StatusOr<PeerId> connect(Transport& server, Transport& client) {
    auto port = server.listen("127.0.0.1", 0);
    REQUIRE(port.ok());
    echoWithHold(server);
    auto peer = client.connect(Endpoint::tcp("127.0.0.1", *port));
    REQUIRE(peer.ok());
    return peer;
  }
};

TEST_CASE("transport: a caller receives on its own connection, then the I/O thread again") {
  EchoPair pair;
  auto& [server, client, peer] = pair;
  const auto soon = [] { return std::chrono::steady_clock::now() + 10s; };
  CHECK_FALSE(client->receiveOn(*peer, soon(), [] { return false; }));  // no handler yet

  Handled handled;
  client->onMessage([&](TransportMessage msg) { handled.add(msg); });
  REQUIRE(untilReceivable(*client, *peer));
  CHECK_FALSE(client->receiveOn(*peer + 100, soon(), [] { return false; }));  // no such connection

  // Three requests, answered only once this thread receives (it sends "go" from its first done()):
  // the replies are handled on this thread, the two before the awaited one too.
  for (const char* m : {"a", "b", "c"})
    REQUIRE(client->send(*peer, {Blob::fromString(m), Blob::fromString("hold")}).ok());
  bool go_sent = false;
  CHECK(client->receiveOn(*peer, soon(), [&] {
    if (!go_sent) go_sent = client->send(*peer, {Blob::fromString("go")}).ok();
    return handled.has(3);
  }));
  REQUIRE(handled.has(3));
  for (int i = 0; i < 3; ++i) {
    CHECK(handled.messages[i].first == std::string(1, static_cast<char>('a' + i)));
    CHECK(handled.messages[i].second == std::this_thread::get_id());
  }

  // Nothing comes: the wait ends at its deadline.
  const auto start = std::chrono::steady_clock::now();
  CHECK(client->receiveOn(*peer, start + 300ms, [] { return false; }));
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= 300ms);
  CHECK(waited < 5s);

  // One receiving thread per connection; wakeReceivers makes it look at what it waits for.
  std::atomic<bool> stop{false}, inside{false};
  std::thread receiver([&] {
    CHECK(client->receiveOn(*peer, soon(), [&] {
      inside = true;
      return stop.load();
    }));
  });
  while (!inside) std::this_thread::sleep_for(1ms);
  CHECK_FALSE(client->receiveOn(*peer, soon(), [] { return false; }));
  stop = true;
  client->wakeReceivers();
  receiver.join();

  // Back with the I/O thread: a reply nobody waits for is still handled.
  REQUIRE(client->send(*peer, {Blob::fromString("d")}).ok());
  {
    std::unique_lock<std::mutex> lock(handled.mu);
    REQUIRE(handled.cv.wait_for(lock, 10s, [&] { return handled.messages.size() == 4; }));
    CHECK(handled.messages[3].first == "d");
    CHECK(handled.messages[3].second != std::this_thread::get_id());
  }
  client->close();
  server->close();
}

TEST_CASE("transport: a connection stays with its last receiver, and goes back to the I/O thread when needed") {
  EchoPair pair;
  auto& [server, client, peer] = pair;
  Handled handled;
  client->onMessage([&](TransportMessage msg) { handled.add(msg); });
  REQUIRE(untilReceivable(*client, *peer));
  const auto soon = [] { return std::chrono::steady_clock::now() + 10s; };
  const auto handledBy = [&](size_t i) {
    std::lock_guard<std::mutex> lock(handled.mu);
    return handled.messages.at(i);
  };
  const auto waitFor = [&](size_t n) {
    std::unique_lock<std::mutex> lock(handled.mu);
    return handled.cv.wait_for(lock, 10s, [&] { return handled.messages.size() >= n; });
  };

  // Request after request on one thread: it sends while the connection is parked with it, without
  // asking ZMQ_EVENTS, and its receive finds each reply. A missed signal would cost a 100 ms slice.
  const auto start = std::chrono::steady_clock::now();
  constexpr size_t kRounds = 300;
  for (size_t i = 0; i < kRounds; ++i) {
    REQUIRE(client->send(*peer, {Blob::fromString("r" + std::to_string(i))}).ok());
    REQUIRE(client->receiveOn(*peer, soon(), [&] { return handled.has(i + 1); }));
  }
  const auto rounds = std::chrono::steady_clock::now() - start;
  CHECK(rounds < 5s);
  // Mostly on this thread; a caller descheduled for longer than the parking lasts (a loaded machine)
  // finds its reply handled by the I/O thread, which took the connection back.
  size_t here = 0;
  for (size_t i = 0; i < kRounds; ++i) {
    CHECK(handledBy(i).first == "r" + std::to_string(i));
    here += handledBy(i).second == std::this_thread::get_id() ? 1 : 0;
  }
  INFO(here << " of " << kRounds << " replies handled by the receiving caller");
  CHECK(here >= kRounds / 2);

  // The same thread sends and does not receive: the I/O thread takes the connection back once it
  // stayed parked a few milliseconds, and handles the reply.
  const auto sent = std::chrono::steady_clock::now();
  REQUIRE(client->send(*peer, {Blob::fromString("unawaited")}).ok());
  REQUIRE(waitFor(kRounds + 1));
  CHECK(std::chrono::steady_clock::now() - sent < 1s);
  CHECK(handledBy(kRounds).first == "unawaited");
  CHECK(handledBy(kRounds).second != std::this_thread::get_id());

  // Another thread sends on a connection parked with this one: it goes back to the I/O thread.
  REQUIRE(client->send(*peer, {Blob::fromString("parked")}).ok());
  REQUIRE(client->receiveOn(*peer, soon(), [&] { return handled.has(kRounds + 2); }));
  std::thread other([&] { CHECK(client->send(*peer, {Blob::fromString("from another thread")}).ok()); });
  other.join();
  REQUIRE(waitFor(kRounds + 3));
  CHECK(handledBy(kRounds + 2).first == "from another thread");
  CHECK(handledBy(kRounds + 2).second != std::this_thread::get_id());

  // A thread that waits for the I/O thread's deliveries takes parked connections back, and none is
  // parked meanwhile: the reply to a request sent after a receiveOn reaches the I/O thread.
  REQUIRE(client->send(*peer, {Blob::fromString("parked again")}).ok());
  REQUIRE(client->receiveOn(*peer, soon(), [&] { return handled.has(kRounds + 4); }));
  client->beginWaitOnIoThread();
  REQUIRE(client->send(*peer, {Blob::fromString("hosted")}).ok());
  REQUIRE(client->receiveOn(*peer, soon(), [&] { return handled.has(kRounds + 5); }));
  REQUIRE(client->send(*peer, {Blob::fromString("while waiting")}).ok());
  REQUIRE(waitFor(kRounds + 6));
  client->endWaitOnIoThread();
  CHECK(handledBy(kRounds + 5).first == "while waiting");
  CHECK(handledBy(kRounds + 5).second != std::this_thread::get_id());
  client->close();
  server->close();
}

}  // namespace
}  // namespace zps
