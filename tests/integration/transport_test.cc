// The ZeroMQ transport on loopback within one process: onMessage() takes over from recv(), first with
// the messages already queued, in order, then with new ones.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
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
  auto peer = client->connect("127.0.0.1", *port);
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
  CHECK(client->connectIpc("Bad/Name").status().code() == StatusCode::kInvalidArgument);
  auto peer = client->connectIpc(listening.ipc_name);
  REQUIRE(peer.ok());
  REQUIRE(client->send(*peer, {Blob::fromString("over ipc")}).ok());
  auto got = server->recv(std::chrono::steady_clock::now() + 10s);
  REQUIRE(got.ok());
  CHECK(got->frames[0].view() == "over ipc");
  client->close();
  server->close();
}

}  // namespace
}  // namespace zps
