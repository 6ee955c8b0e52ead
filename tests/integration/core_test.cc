// The real zps binary on loopback: whole jobs, start-up orders, rendezvous failures and bad env.
#include <signal.h>

#include <catch2/catch.hpp>
#include <thread>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::readFile;
using namespace std::chrono_literals;

namespace {

// Starts a whole job and expects every process to exit 0.
void runJob(Cluster& c, int servers, int workers, const std::vector<std::string>& args, std::chrono::seconds deadline) {
  c.startScheduler();
  for (int s = 0; s < servers; ++s) c.startServer();
  std::vector<int> w;
  for (int i = 0; i < workers; ++i) w.push_back(c.startWorker(i, args));
  c.expectAllExitZero(deadline);
  for (int i : w) CHECK(contains(c.log(i), " 0 wrong"));
}

}  // namespace

TEST_CASE("1 server x 1 worker: check over 10 rounds, 1 B to 9 MiB, every dtype") {
  Cluster c(1, 1);
  runJob(c, 1, 1, {"check", "--rounds", "10"}, 120s);
  // Same host, same network namespace: the worker moved to the server's ipc socket.
  CHECK(contains(c.log(2), "1 of 1 servers are on this host; using their ipc:// sockets"));  // 2: the worker
  CHECK(contains(c.log(2), "links to the servers: 0 ipc://@zps-"));
}

TEST_CASE("ZPS_IPC=0 keeps a same-host link on TCP, whichever side sets it") {
  // The worker turns it off: the server still offers its ipc socket and the worker declines.
  Cluster a(1, 1);
  a.startScheduler();
  a.startServer();
  int w = a.startWorker(0, {"check", "--rounds", "3", "--sizes", "4K,1M+1"}, {{"ZPS_IPC", "0"}});
  a.expectAllExitZero(120s);
  CHECK(contains(a.log(w), " 0 wrong"));
  CHECK(contains(a.log(w), "links to the servers: 0 tcp://127.0.0.1:"));
  CHECK(contains(a.log(w), "(ZPS_IPC=0: same-host servers stay on TCP)"));
  CHECK_FALSE(contains(a.log(w), "using their ipc:// sockets"));
  // The server turns it off: it offers no ipc socket, so the worker has nowhere to move.
  Cluster b(1, 1);
  b.startScheduler();
  b.startServer({{"ZPS_IPC", "0"}});
  w = b.startWorker(0, {"check", "--rounds", "3", "--sizes", "4K,1M+1"});
  b.expectAllExitZero(120s);
  CHECK(contains(b.log(w), " 0 wrong"));
  CHECK(contains(b.log(w), "links to the servers: 0 tcp://127.0.0.1:"));
  CHECK_FALSE(contains(b.log(w), "using their ipc:// sockets"));
}

TEST_CASE("2 servers x 3 workers: check over 10 rounds, 1 B to 9 MiB, every dtype") {
  Cluster c(2, 3);
  runJob(c, 2, 3, {"check", "--rounds", "10"}, 180s);
}

TEST_CASE("2 servers x 3 workers: 64 MiB float32 tensors over 10 rounds") {
  Cluster c(2, 3);
  runJob(c, 2, 3, {"check", "--rounds", "10", "--sizes", "64M,3", "--dtypes", "float32"}, 240s);
}

TEST_CASE("small partitions: a tensor cut into many partitions over 3 servers") {
  Cluster c(3, 2);
  c.setEnv("ZPS_PARTITION_BYTES", "4096");
  runJob(c, 3, 2, {"check", "--rounds", "10", "--sizes", "1M+7,64K", "--dtypes", "float32,uint8,float16"}, 120s);
}

TEST_CASE("workers started before the scheduler still finish") {
  Cluster c(1, 2);
  int w0 = c.startWorker(0, {"check", "--rounds", "10", "--sizes", "4K,1M+1"});
  int w1 = c.startWorker(1, {"check", "--rounds", "10", "--sizes", "4K,1M+1"});
  std::this_thread::sleep_for(1500ms);
  c.startServer();
  c.startScheduler();
  c.expectAllExitZero(120s);
  CHECK(contains(c.log(w0), "zps check: worker 0"));
  CHECK(contains(c.log(w1), "zps check: worker 1"));
}

TEST_CASE("DMLC_WORKER_ID given in reverse start order decides the ranks") {
  Cluster c(2, 3);
  c.startScheduler();
  c.startServer();
  c.startServer();
  std::vector<int> idx(3);
  for (int id = 2; id >= 0; --id) {
    idx[id] = c.startWorker(id, {"check", "--rounds", "10", "--sizes", "4K,1M+3"});
    std::this_thread::sleep_for(200ms);
  }
  c.expectAllExitZero(120s);
  for (int id = 0; id < 3; ++id) CHECK(contains(c.log(idx[id]), "zps check: worker " + std::to_string(id) + ":"));
}

TEST_CASE("arrival order assigns ranks when no id is given, as with three shells") {
  Cluster c(1, 1);
  c.setEnv("HOSTNAME", "plainhost");
  int s = c.startScheduler();
  int srv = c.startServer({{"ZPS_SERVER_ID", ""}});
  int w = c.startWorker(-1, {"check", "--rounds", "3", "--sizes", "4K"});
  CHECK(c.waitExit(w, 60s) == 0);
  CHECK(c.waitExit(srv, 30s) == 0);
  CHECK(c.waitExit(s, 30s) == 0);
  CHECK(contains(c.log(s), "rank from arrival order"));
}

TEST_CASE("a missing worker: every process exits non-zero in time and the log names the rank") {
  Cluster c(1, 2);
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "3");
  c.setEnv("ZPS_RENDEZVOUS_LOG_INTERVAL", "1");
  int s = c.startScheduler();
  int srv = c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "3"});
  auto start = std::chrono::steady_clock::now();
  auto codes = c.waitAll(30s);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(took < 15);
  for (int i : {s, srv, w0}) {
    INFO(c.logTail(i));
    CHECK(codes[i] != 0);
    CHECK(contains(c.log(i), "worker rank 1"));
  }
  CHECK(contains(c.log(s), "rendezvous timed out"));
  CHECK(contains(c.log(s), "scheduler waiting"));  // the periodic report while it waited
}

TEST_CASE("a duplicate DMLC_WORKER_ID is refused and the refused worker says why") {
  Cluster c(1, 2);
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "5");
  int s = c.startScheduler();
  c.startServer();
  int a = c.startWorker(0, {"check", "--rounds", "1"});
  // The second one must register while the scheduler still waits (a fixed sleep was too short under
  // load: the rendezvous ended first and the late worker waited for a scheduler that had gone).
  REQUIRE(c.waitForLog(s, "registered worker 0", 20s));
  int b = c.startWorker(0, {"check", "--rounds", "1"});
  int code_b = c.waitExit(b, 20s);
  INFO(c.logTail(b));
  CHECK(code_b != 0);
  CHECK(contains(c.log(b), "worker rank 0 (from DMLC_WORKER_ID) is already taken"));
  CHECK(c.waitExit(a, 20s) != 0);  // the job never filled up
}

TEST_CASE("an out-of-range DMLC_WORKER_ID is refused") {
  Cluster c(1, 2);
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "3");
  c.startScheduler();
  c.startServer();
  int b = c.startWorker(5, {"check", "--rounds", "1"});
  INFO(c.logTail(b));
  CHECK(c.waitExit(b, 20s) != 0);
  CHECK(contains(c.log(b), "out of range"));
  c.waitAll(20s);
}

TEST_CASE("a server killed mid-job is named and every process exits non-zero") {
  Cluster c(2, 2);
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.2");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "2");
  int s = c.startScheduler();
  int s0 = c.startServer();
  c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "100000", "--sizes", "4K"});
  int w1 = c.startWorker(1, {"check", "--rounds", "100000", "--sizes", "4K"});
  // Killed only once the job runs: a server killed before it registered is "missing", not "dead".
  REQUIRE(c.waitForLog(s, "nodes registered in"));
  std::this_thread::sleep_for(500ms);
  REQUIRE(c.running(w0));
  c.signal(s0, SIGKILL);
  auto codes = c.waitAll(20s);
  CHECK(codes[s] != 0);
  CHECK(codes[w0] != 0);
  CHECK(codes[w1] != 0);
  INFO(c.logTail(s));
  CHECK(contains(c.log(s), "node dead: server 0"));
  CHECK(contains(c.log(w0), "server 0"));
}

TEST_CASE("bad environment values exit 2 with a line saying what to fix") {
  struct Case {
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{{"DMLC_ROLE", "bogus"}}, {}, "DMLC_ROLE='bogus' is not a role"},
      {{{"DMLC_ROLE", "scheduler"}, {"DMLC_NUM_WORKER", "abc"}}, {}, "DMLC_NUM_WORKER='abc' is not a whole number"},
      {{{"DMLC_ROLE", "scheduler"}, {"DMLC_NUM_SERVER", "0"}}, {}, "DMLC_NUM_SERVER=0 is out of range"},
      {{{"DMLC_ROLE", "server"}, {"DMLC_PS_ROOT_PORT", "70000"}}, {}, "DMLC_PS_ROOT_PORT=70000 is out of range"},
      {{{"DMLC_ROLE", "server"}, {"DMLC_PS_ROOT_URI", ""}}, {}, "DMLC_PS_ROOT_URI is not set"},
      {{{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", "x1"}}, {"check"}, "DMLC_WORKER_ID='x1' is not a whole number"},
      {{{"DMLC_ROLE", "worker"}, {"ZPS_RENDEZVOUS_TIMEOUT", "soon"}}, {"check"}, "ZPS_RENDEZVOUS_TIMEOUT='soon'"},
      {{{"DMLC_ROLE", "worker"}, {"DMLC_PS_ROOT_URI", "no-such-host.invalid"}, {"ZPS_CONNECT_TIMEOUT", "1"}},
       {"check"},
       "'no-such-host.invalid' does not resolve"},
      {{{"DMLC_ROLE", "worker"}}, {}, "needs a worker program"},
      {{{"DMLC_ROLE", "server"}}, {"check"}, "run it with DMLC_ROLE=worker"},
  };
  for (const auto& tc : cases) {
    Cluster c(1, 1);
    std::vector<std::string> argv = {c.bin()};
    argv.insert(argv.end(), tc.args.begin(), tc.args.end());
    int p = c.start("zps", argv, tc.env);
    int code = c.waitExit(p, 20s);
    INFO(tc.message << "\n" << c.logTail(p));
    CHECK(code == 2);
    CHECK(contains(c.log(p), tc.message));
  }
}

TEST_CASE("zps bench prints its table and a PASS footer") {
  Cluster c(1, 2);
  std::vector<std::string> args = {
      "bench", "--sizes", "4K,1M", "--min_time", "0.05", "--json", c.dir() + "/bench.json"};
  c.startScheduler();
  c.startServer();
  int w0 = c.startWorker(0, args);
  c.startWorker(1, args);
  auto codes = c.waitAll(120s);
  for (int code : codes) CHECK(code == 0);
  INFO(c.log(w0));
  CHECK(contains(c.log(w0), "goodput(GB/s)"));
  CHECK(contains(c.log(w0), "#wrong"));
  CHECK(contains(c.log(w0), "# zps bench: PASS"));
  // Two workers: the server adds, so it reports its CPU per byte and its summation speed, and the
  // footer gives every process's peak RSS.
  CHECK(contains(c.log(w0), "# peak RSS: servers "));
  const std::string body = readFile(c.dir() + "/bench.json");
  INFO(body);
  CHECK(contains(body, "\"pass\":true"));
  CHECK(contains(body, "\"declared_bytes\":1052680"));  // 4K + 1M + the 8 B control key
  CHECK(!contains(body, "\"server_ns_per_byte\":-1"));
  CHECK(!contains(body, "\"sum_gbs\":-1"));
  CHECK(!contains(body, "\"server_peak_rss_bytes\":0"));
}

// The number after "key": in a flat JSON object (zps bench --json), 0 when it is missing.
uint64_t jsonNumber(const std::string& body, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = body.find(needle);
  return at == std::string::npos ? 0 : std::stoull(body.substr(at + needle.size()));
}

TEST_CASE("zps bench --model resnet50: every gradient tensor in backward order against one fused tensor") {
  Cluster c(2, 2);
  // Four rounds: with every result kept for three rounds, a server held over 3x its key bytes.
  std::vector<std::string> args = {
      "bench",          "--model", "resnet50", "--min_iters",          "3", "--max_iters", "3",
      "--warmup_iters", "1",       "--json",   c.dir() + "/bench.json"};
  c.startScheduler();
  c.startServer();
  c.startServer();
  int w0 = c.startWorker(0, args);
  c.startWorker(1, args);
  c.expectAllExitZero(120s);
  INFO(c.log(w0));
  CHECK(contains(c.log(w0), "resnet50 (161 tensors)"));
  CHECK(contains(c.log(w0), "resnet50 fused"));
  CHECK(contains(c.log(w0), "# resnet50 round / fused round (p50): "));
  CHECK(contains(c.log(w0), "# zps bench: PASS"));
  // The performance goal for server memory: peak RSS at most 2.5x the key bytes it holds + 64 MiB.
  // Workers say which results they have (received_through), so servers free them early.
  const std::string body = readFile(c.dir() + "/bench.json");
  const uint64_t rss = jsonNumber(body, "server_peak_rss_bytes");
  const uint64_t keys = jsonNumber(body, "declared_bytes");
  INFO("server peak RSS " << rss / 1048576.0 << " MiB, its keys " << keys / 1048576.0 << " MiB");
  CHECK(keys > 90u * 1048576);
  CHECK(rss > 0);
  CHECK(rss <= keys * 5 / 2 + 64u * 1048576);
}

TEST_CASE("zps launch runs a whole job, prefixes lines and passes on the first failure") {
  Cluster c(1, 1);
  int ok = c.start("launch", {c.bin(), "launch", "--servers", "2", "--workers", "2", "--", "check", "--rounds", "3",
                              "--sizes", "4K"});
  CHECK(c.waitExit(ok, 60s) == 0);
  CHECK(contains(c.log(ok), "[worker 1] zps check: worker 1:"));
  CHECK(contains(c.log(ok), "[scheduler] "));

  int bad = c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "2", "--", "sh", "-c",
                               "if [ \"$DMLC_WORKER_ID\" = 1 ]; then exit 3; fi; sleep 60"});
  CHECK(c.waitExit(bad, 60s) == 3);

  int usage = c.start("launch", {c.bin(), "launch", "--servers", "x", "--workers", "2", "--", "check"});
  CHECK(c.waitExit(usage, 20s) == 2);
}

TEST_CASE("with 5% drops, duplicates and delays injected, zps check still finds exact sums") {
  Cluster c(2, 2);
  c.setEnv("ZPS_TEST_FAULTS", "drop=0.05,dup=0.05,delay=0.05");
  c.setEnv("ZPS_RESEND_TIMEOUT", "0.3");
  c.startScheduler();
  int s0 = c.startServer();
  c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "20", "--sizes", "1,4K,1M+3"});
  int w1 = c.startWorker(1, {"check", "--rounds", "20", "--sizes", "1,4K,1M+3"});
  c.expectAllExitZero(180s);
  for (int w : {w0, w1}) {
    CHECK(contains(c.log(w), " 0 wrong"));
    // Faults wrap the transport: same-host links still move to ipc (and its shared memory) as without them.
    CHECK(contains(c.log(w), "2 of 2 servers are on this host; using their ipc:// sockets"));
  }
  CHECK(contains(c.log(s0), "injected"));
  CHECK((contains(c.log(w0), "resent") || contains(c.log(w1), "resent")));
}

TEST_CASE("a bad ZPS_TEST_FAULTS is a user error") {
  Cluster c(1, 1);
  int p = c.start("zps", {c.bin()}, {{"DMLC_ROLE", "server"}, {"ZPS_TEST_FAULTS", "drop=lots"}});
  CHECK(c.waitExit(p, 20s) == 2);
  CHECK(contains(c.log(p), "ZPS_TEST_FAULTS"));
}

TEST_CASE("SIGTERM: a server says goodbye and exits 0, the scheduler names it and ends the job") {
  Cluster c(1, 2);
  int s = c.startScheduler();
  int srv = c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "100000", "--sizes", "4K"});
  int w1 = c.startWorker(1, {"check", "--rounds", "100000", "--sizes", "4K"});
  REQUIRE(c.waitForLog(s, "nodes registered in"));
  std::this_thread::sleep_for(500ms);
  REQUIRE(c.running(w0));
  c.signal(srv, SIGTERM);
  CHECK(c.waitExit(srv, 20s) == 0);
  CHECK(c.waitExit(s, 20s) != 0);
  CHECK(c.waitExit(w0, 20s) != 0);
  CHECK(c.waitExit(w1, 20s) != 0);
  INFO(c.logTail(s));
  CHECK(contains(c.log(s), "left: server got signal 15"));
}

TEST_CASE("SIGTERM: the scheduler ends the job for everyone and exits 0") {
  Cluster c(1, 1);
  int s = c.startScheduler();
  int srv = c.startServer();
  int w = c.startWorker(0, {"check", "--rounds", "100000", "--sizes", "4K"});
  REQUIRE(c.waitForLog(s, "nodes registered in"));
  std::this_thread::sleep_for(500ms);
  REQUIRE(c.running(w));
  c.signal(s, SIGTERM);
  CHECK(c.waitExit(s, 20s) == 0);
  CHECK(c.waitExit(srv, 20s) != 0);
  CHECK(c.waitExit(w, 20s) != 0);
  CHECK(contains(c.log(w), "the scheduler got signal 15"));
}
