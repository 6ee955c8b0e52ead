// Connections that are reset mid-job and a scheduler that restarts mid-job (docs/reliability.md): the
// job goes on and every pulled sum is exact.
//
// Resets are real TCP resets: the test moves itself into a private network namespace (loopback only,
// nothing leaves the machine) and kills established connections with `ss -K`, as a load balancer or a
// conntrack flush would. Without the rights for that (not root, no unshare, no ss) the test exits 77,
// which ctest reports as skipped, after saying why.
#include <sched.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
  std::exit(77);
}

// Moves this process (and the processes it starts) into a new network namespace with loopback up.
void enterPrivateNetwork() {
  if (std::system("ss -V >/dev/null 2>&1") != 0) skip("ss (iproute2) is not installed");
  if (unshare(CLONE_NEWNET) != 0) skip(std::string("cannot make a private network namespace: ") + strerror(errno));
  if (std::system("ip link set lo up") != 0) skip("cannot bring loopback up in the private network namespace");
}

// Kills the established TCP connections that `filter` (an ss filter) selects; returns how many.
int resetConnections(const std::string& filter) {
  std::string command = "ss -K -t -n -H state established '" + filter + "' 2>/dev/null";
  FILE* out = popen(command.c_str(), "r");
  if (out == nullptr) return 0;
  int killed = 0;
  char line[512];
  while (std::fgets(line, sizeof(line), out) != nullptr) ++killed;
  pclose(out);
  return killed;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Resets the connections `filter` selects every `period`, `times` times; returns the sockets killed.
int resetRepeatedly(const std::string& filter, int times, std::chrono::milliseconds period) {
  int killed = 0;
  for (int i = 0; i < times; ++i) {
    std::this_thread::sleep_for(period);
    killed += resetConnections(filter);
  }
  return killed;
}

// Starts workers 0 and 1 of a 2-server check job long enough to be hit mid-job (2500 rounds of 256 KiB
// and 4 KiB+3 tensors, 10-20 s here) and waits until both are connected to the servers.
// `rounds` sets how long the job runs: 2500 take about 6 s on 2 idle cores.
std::pair<int, int> startCheckWorkers(Cluster& c, const std::string& rounds = "2500") {
  const std::vector<std::string> args = {"check",     "--rounds", rounds,         "--sizes",
                                         "256K,4K+3", "--dtypes", "float32,int32"};
  const int w0 = c.startWorker(0, args);
  const int w1 = c.startWorker(1, args);
  REQUIRE(c.waitForLog(w0, "connected to 2 servers", 60s));
  REQUIRE(c.waitForLog(w1, "connected to 2 servers", 60s));
  return {w0, w1};
}

}  // namespace

TEST_CASE("connection resets mid-job: worker-server and node-scheduler connections come back and sums stay exact",
          "[reconnect]") {
  enterPrivateNetwork();
  // Without recovery and an open job; with recovery and a token (the handshake is checked again).
  for (const bool recovery : {false, true}) {
    INFO("ZPS_RECOVERY=" << recovery);
    Cluster c(2, 2);
    c.setEnv("ZPS_RECOVERY", recovery ? "1" : "0");
    if (recovery) c.setEnv("ZPS_AUTH_TOKEN", "reconnect-test-token-0123456789");
    c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
    c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "10");
    // Same-host workers would move to the servers' ipc sockets, which ss cannot reset.
    c.setEnv("ZPS_IPC", "0");
    const int scheduler = c.startScheduler();
    c.startServer();
    c.startServer();
    const auto [w0, w1] = startCheckWorkers(c);
    const auto started = Clock::now();
    const std::string sched = std::to_string(c.port());
    // Worker-server connections first, then the nodes' connections to the scheduler.
    const int data_killed = resetRepeatedly("not ( sport = :" + sched + " or dport = :" + sched + " )", 5, 200ms);
    const int control_killed = resetRepeatedly("( sport = :" + sched + " or dport = :" + sched + " )", 5, 200ms);
    const double reset_s = std::chrono::duration<double>(Clock::now() - started).count();
    for (int i : {w0, w1}) REQUIRE(c.running(i));  // the resets hit a job in progress
    c.expectAllExitZero(180s);
    const double job_s = std::chrono::duration<double>(Clock::now() - started).count();
    int worker_reconnects = 0, control_reconnects = 0;
    for (int i : {w0, w1}) {
      CHECK(contains(c.log(i), " 0 wrong"));
      worker_reconnects += count(c.log(i), "was reset and is back; resent");
    }
    for (int i = 0; i < 5; ++i)
      if (i != scheduler) control_reconnects += count(c.log(i), "registered again with scheduler");
    std::cout << "reconnect test (" << (recovery ? "ZPS_RECOVERY=1, ZPS_AUTH_TOKEN" : "ZPS_RECOVERY=0, open job")
              << "): " << data_killed << " worker-server sockets reset, " << control_killed
              << " node-scheduler sockets reset in " << reset_s << " s; " << worker_reconnects << " worker-server and "
              << control_reconnects << " node-scheduler reconnections; job done " << job_s
              << " s after the first reset, 0 wrong" << std::endl;
    CHECK(data_killed > 0);
    CHECK(control_killed > 0);
    CHECK(worker_reconnects > 0);
    CHECK(control_reconnects > 0);
  }
}

TEST_CASE("connection resets mid-job with priority scheduling: both lanes of each link come back, sums stay exact",
          "[reconnect]") {
  enterPrivateNetwork();
  Cluster c(2, 2);
  c.setEnv("ZPS_PRIORITY", "1");
  c.setEnv("ZPS_PUSH_LANE", "1");  // scheduled pushes travel on a second connection
  c.setEnv("ZPS_PARTITION_BYTES", "65536");
  c.setEnv("ZPS_CREDIT_BYTES", "65536");
  c.setEnv("ZPS_IPC", "0");                                       // ss cannot reset ipc sockets
  c.setEnv("ZPS_AUTH_TOKEN", "reconnect-test-token-0123456789");  // the lanes' HELLOs are signed too
  c.startScheduler();
  c.startServer();
  c.startServer();
  const auto [w0, w1] = startCheckWorkers(c);
  for (int i : {w0, w1}) REQUIRE(contains(c.log(i), "push lanes open to 2 of 2 servers"));
  const std::string sched = std::to_string(c.port());
  // Every worker-server connection, the lanes and the first connections alike: at first 2 workers x 2
  // servers x 2 connections (killing one end takes the other out of the established state), then
  // whatever has come back each time.
  const std::string data = "not ( sport = :" + sched + " or dport = :" + sched + " )";
  const int first = resetConnections(data);
  CHECK(first >= 8);  // 4 without the lanes
  const int killed = first + resetRepeatedly(data, 4, 200ms);
  for (int i : {w0, w1}) REQUIRE(c.running(i));
  c.expectAllExitZero(180s);
  int reconnects = 0;
  for (int i : {w0, w1}) {
    CHECK(contains(c.log(i), " 0 wrong"));
    reconnects += count(c.log(i), "was reset and is back; resent");
  }
  std::cout << "reconnect test with push lanes: " << killed << " worker-server sockets reset; " << reconnects
            << " reconnections, 0 wrong" << std::endl;
  CHECK(reconnects > 0);
}

TEST_CASE("scheduler SIGKILL and restart mid-job with ZPS_RECOVERY: the nodes rebuild the job and sums stay exact",
          "[reconnect]") {
  Cluster c(2, 2);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "4");
  const int first = c.startScheduler();
  const int s0 = c.startServer();
  const int s1 = c.startServer();
  // 10000 rounds (about 25 s idle): the job must still be running when the new scheduler has rebuilt
  // it; with 2500 an idle machine finished the rounds in the 5.5 s before the restart.
  const auto [w0, w1] = startCheckWorkers(c, "10000");
  std::this_thread::sleep_for(500ms);
  c.signal(first, SIGKILL);
  CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
  const auto killed = Clock::now();
  // Longer than the heartbeat timeout: the nodes notice the silence and look for a scheduler.
  std::this_thread::sleep_for(5s);
  for (int i : {w0, w1}) REQUIRE(c.running(i));
  const int second = c.startScheduler();
  REQUIRE(c.waitForLog(second, "rebuilt from its nodes", 60s));
  const double rebuilt_s = std::chrono::duration<double>(Clock::now() - killed).count();
  for (int i : {w0, w1}) CHECK(c.running(i));  // rebuilt while the job was still pushing
  for (int i : {s0, s1, w0, w1, second}) CHECK(c.waitExit(i, 180s) == 0);
  for (int i : {w0, w1}) CHECK(contains(c.log(i), " 0 wrong"));
  CHECK(contains(c.log(w0), "has been silent for"));
  std::cout << "scheduler restart test: the job was rebuilt " << rebuilt_s
            << " s after the SIGKILL (5 s of it with no scheduler), 0 wrong" << std::endl;
}

TEST_CASE("scheduler SIGKILL and restart without ZPS_RECOVERY: the nodes fail naming the scheduler", "[reconnect]") {
  Cluster c(1, 1);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "30");
  const int first = c.startScheduler();
  const int s0 = c.startServer();
  const int w0 = c.startWorker(0, {"check", "--rounds", "100000", "--sizes", "4K", "--dtypes", "float32"});
  REQUIRE(c.waitForLog(w0, "connected to 1 servers", 60s));
  c.signal(first, SIGKILL);
  CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
  const int second = c.startScheduler({{"ZPS_RENDEZVOUS_TIMEOUT", "20"}});
  for (int i : {s0, w0}) {
    CHECK(c.waitExit(i, 60s) == 1);
    CHECK(contains(c.log(i), "refused this node when it registered again"));
    CHECK(contains(c.log(i), "127.0.0.1:" + std::to_string(c.port())));
  }
  CHECK(c.waitExit(second, 60s) == 1);
}

TEST_CASE("scheduler restarts at a new address under the same name with ZPS_RECOVERY: the nodes find it",
          "[reconnect]") {
  enterPrivateNetwork();
  // The scheduler's name resolves through /etc/hosts, which this test replaces in a private mount
  // namespace (a file of its own, bind-mounted), as a restarted pod's DNS name would change address.
  if (unshare(CLONE_NEWNS) != 0) skip(std::string("cannot make a private mount namespace: ") + strerror(errno));
  if (std::system("mount --make-rprivate / 2>/dev/null") != 0) skip("cannot make mounts private");
  Cluster c(1, 1);
  const std::string hosts = c.dir() + "/hosts";
  auto point = [&](const std::string& ip) {
    FILE* f = std::fopen(hosts.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fprintf(f, "127.0.0.1 localhost\n%s zps-scheduler.test\n", ip.c_str());
    std::fclose(f);
  };
  point("127.0.0.1");
  if (std::system(("mount --bind " + hosts + " /etc/hosts").c_str()) != 0) skip("cannot bind-mount /etc/hosts");
  c.setEnv("DMLC_PS_ROOT_URI", "zps-scheduler.test");
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "1");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "3");
  const int first = c.startScheduler({{"ZPS_BIND_HOST", "127.0.0.1"}});
  const int s0 = c.startServer();
  // Enough rounds to outlast the move by far (about 2.5 s per 6000 rounds on one host today).
  const int w0 = c.startWorker(0, {"check", "--rounds", "30000", "--sizes", "256K,4K+3", "--dtypes", "float32"});
  REQUIRE(c.waitForLog(w0, "connected to 1 servers", 60s));
  c.signal(first, SIGKILL);
  CHECK(c.waitExit(first, 10s) == 128 + SIGKILL);
  const auto killed = Clock::now();
  point("127.0.0.2");
  const int second = c.startScheduler({{"ZPS_BIND_HOST", "127.0.0.2"}});
  REQUIRE(c.waitForLog(second, "rebuilt from its nodes", 60s));
  const double rebuilt_s = std::chrono::duration<double>(Clock::now() - killed).count();
  CHECK(c.running(w0));  // rebuilt while the job was still pushing
  for (int i : {s0, w0, second}) CHECK(c.waitExit(i, 180s) == 0);
  CHECK(contains(c.log(w0), " 0 wrong"));
  CHECK(contains(c.log(w0), "moved from 127.0.0.1 to 127.0.0.2"));
  CHECK(contains(c.log(s0), "moved from 127.0.0.1 to 127.0.0.2"));
  std::cout << "scheduler move test: the job was rebuilt at the new address " << rebuilt_s
            << " s after the SIGKILL, 0 wrong" << std::endl;
}
