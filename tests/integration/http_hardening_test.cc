// The scheduler's HTTP endpoint: with a token, everything but /metrics and /healthz needs it; and
// fifty clients that connect and send (almost) nothing do not keep /healthz from answering.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <thread>

#include "ps/node/http_server.h"
#include "tests/integration/cluster.h"
#include "tools/process.h"

using zps::httpGet;
using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

const char* kToken = "http-hardening-test-token-0123456789";

int status(int port, const std::string& path, const std::string& token = "") {
  auto r = httpGet("127.0.0.1", port, path, 5s, token);
  return r.ok() ? r->first : -1;
}

// The scheduler's HTTP port once it serves /metrics.
void waitForHttp(int port) {
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (status(port, "/metrics") != 200 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  REQUIRE(status(port, "/metrics") == 200);
}

}  // namespace

TEST_CASE("http: with a token, only /metrics and /healthz are open") {
  Cluster c(1, 1);
  int port = zps::proc::pickFreeTcpPort();
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  int s = c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(port)}});
  waitForHttp(port);
  CHECK(status(port, "/healthz") == 503);  // no node yet: not healthy, but answered without a token
  for (const char* path : {"/api/status", "/api/summary", "/status", "/"}) {
    INFO(path);
    CHECK(status(port, path) == 401);
    CHECK(status(port, path, "wrong-token-wrong-token") == 401);
  }
  CHECK(status(port, "/api/status", kToken) == 200);
  CHECK(status(port, std::string("/?token=") + kToken) == 200);
  // zps status sends the token from its environment, and says what is missing without it.
  int with = c.start("status", {c.bin(), "status"}, {{"ZPS_METRICS_PORT", std::to_string(port)}});
  CHECK(c.waitExit(with, 20s) == 1);  // reached, not healthy
  CHECK(contains(c.log(with), "worker"));
  int without =
      c.start("status", {c.bin(), "status"}, {{"ZPS_METRICS_PORT", std::to_string(port)}, {"ZPS_AUTH_TOKEN", ""}});
  CHECK(c.waitExit(without, 20s) == 2);
  CHECK(contains(c.log(without), "needs the job's token"));
  c.signal(s, SIGTERM);
  c.waitAll(30s);
}

TEST_CASE("http: fifty slow clients do not starve /healthz") {
  Cluster c(1, 1);
  int port = zps::proc::pickFreeTcpPort();
  c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(port)}});
  waitForHttp(port);
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    if (i % 2 == 0) REQUIRE(send(fd, "GET /heal", 9, MSG_NOSIGNAL) == 9);  // half a request line
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(200ms);
  double worst_ms = 0;
  for (int i = 0; i < 5; ++i) {
    auto start = std::chrono::steady_clock::now();
    int code = status(port, "/healthz");
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    worst_ms = std::max(worst_ms, ms);
    CHECK(code == 503);  // answered (no nodes: not healthy)
  }
  std::printf("http: /healthz with 50 slow clients connected: slowest of 5 answers %.0f ms\n", worst_ms);
  CHECK(worst_ms < 1000);
  for (int fd : slow) close(fd);
}
