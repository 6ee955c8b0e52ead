// Every listening socket binds the address it is told: a node started with DMLC_NODE_HOST=127.0.0.1
// (or ZPS_BIND_HOST) cannot be reached at 127.0.0.2, another loopback address of this machine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "tests/integration/cluster.h"
#include "tools/process.h"

using zps::testing::Cluster;
using namespace std::chrono_literals;

namespace {

bool reachable(const char* ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip, &addr.sin_addr);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

int serverPort(Cluster& c, int sched) {
  REQUIRE(c.waitForLog(sched, "registered server 0", 30s));
  std::smatch m;
  std::string log = c.log(sched);
  REQUIRE(std::regex_search(log, m, std::regex("registered server 0 \\(127\\.0\\.0\\.1:(\\d+)")));
  return std::stoi(m[1]);
}

}  // namespace

TEST_CASE("bind address: scheduler, server and metrics listen on DMLC_NODE_HOST only, or on ZPS_BIND_HOST") {
  for (std::string bind : {"", "0.0.0.0"}) {
    INFO("ZPS_BIND_HOST=" << bind);
    Cluster c(1, 1);  // DMLC_NODE_HOST=127.0.0.1
    int metrics = zps::proc::pickFreeTcpPort();
    c.setEnv("ZPS_BIND_HOST", bind);
    int s = c.startScheduler({{"ZPS_METRICS_PORT", std::to_string(metrics)}});
    c.startServer();
    int server = serverPort(c, s);
    REQUIRE(c.waitForLog(s, "metrics on http://", 20s));
    bool everywhere = bind == "0.0.0.0";
    for (int port : {c.port(), server, metrics}) {
      INFO("port " << port);
      CHECK(reachable("127.0.0.1", port));
      CHECK(reachable("127.0.0.2", port) == everywhere);
    }
  }
}
