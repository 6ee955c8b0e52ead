// Authentication with ZPS_AUTH_TOKEN, and CurveZMQ encryption with ZPS_CURVE=1.
#include <sys/inotify.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

const char* kToken = "correct-horse-battery-staple-42";

void expectJobPasses(Cluster& c) {
  c.startScheduler();
  c.startServer();
  c.startServer();
  int w0 = c.startWorker(0, {"check", "--rounds", "10", "--sizes", "1,4K,1M+3"});
  int w1 = c.startWorker(1, {"check", "--rounds", "10", "--sizes", "1,4K,1M+3"});
  c.expectAllExitZero(120s);
  CHECK(contains(c.log(w0), " 0 wrong"));
  CHECK(contains(c.log(w1), " 0 wrong"));
}

}  // namespace

TEST_CASE("auth: with the right token everything works") {
  Cluster c(2, 2);
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  expectJobPasses(c);
}

TEST_CASE("auth: the token can come from a file (a mounted Secret)") {
  Cluster c(2, 2);
  std::ofstream(c.dir() + "/token") << kToken << "\n";
  c.setEnv("ZPS_AUTH_TOKEN_FILE", c.dir() + "/token");
  expectJobPasses(c);
}

// Counts the opens of one file (inotify IN_OPEN) until destroyed: a token file is read once per process.
class OpenCounter {
 public:
  explicit OpenCounter(const std::string& path) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    REQUIRE(fd_ >= 0);
    REQUIRE(inotify_add_watch(fd_, path.c_str(), IN_OPEN) >= 0);
  }
  ~OpenCounter() { close(fd_); }
  int opens() {
    alignas(inotify_event) char buf[4096];
    for (ssize_t n; (n = read(fd_, buf, sizeof(buf))) > 0;) {
      for (char* p = buf; p < buf + n; p += sizeof(inotify_event) + reinterpret_cast<inotify_event*>(p)->len) {
        if (reinterpret_cast<inotify_event*>(p)->mask & IN_OPEN) ++opens_;
      }
    }
    return opens_;
  }

 private:
  int fd_;
  int opens_ = 0;
};

TEST_CASE("auth: each process reads its token file once") {
  // A process that opened its token file a second time could read a token rotated meanwhile.
  Cluster c(1, 1);
  c.setEnv("ZPS_CURVE", "1");  // the scheduler link and the data connections both use the token
  std::vector<std::string> paths;
  std::vector<std::unique_ptr<OpenCounter>> counters;
  for (const char* role : {"scheduler", "server", "worker"}) {
    paths.push_back(c.dir() + "/token-" + role);
    std::ofstream(paths.back()) << kToken << "\n";
    counters.push_back(std::make_unique<OpenCounter>(paths.back()));
  }
  c.startScheduler({{"ZPS_AUTH_TOKEN_FILE", paths[0]}});
  c.startServer({{"ZPS_AUTH_TOKEN_FILE", paths[1]}});
  int w = c.startWorker(0, {"check", "--rounds", "3"}, {{"ZPS_AUTH_TOKEN_FILE", paths[2]}});
  c.expectAllExitZero(60s);
  CHECK(contains(c.log(w), " 0 wrong"));
  for (auto& counter : counters) CHECK(counter->opens() == 1);
}

TEST_CASE("auth: CurveZMQ-encrypted job passes zps check") {
  Cluster c(2, 2);
  c.setEnv("ZPS_AUTH_TOKEN", kToken);
  c.setEnv("ZPS_CURVE", "1");
  expectJobPasses(c);
}

TEST_CASE("auth: an unauthenticated or wrong-token node is refused, and the refusal is logged") {
  for (std::string token : {"", "wrong-token-wrong-token-wrong"}) {
    Cluster c(1, 1);
    c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "4");
    int s = c.startScheduler({{"ZPS_AUTH_TOKEN", kToken}});
    c.startServer({{"ZPS_AUTH_TOKEN", kToken}});
    int w = c.startWorker(0, {"check", "--rounds", "1"}, {{"ZPS_AUTH_TOKEN", token}});
    int code = c.waitExit(w, 30s);
    INFO(c.logTail(w) << c.logTail(s));
    CHECK(code != 0);
    std::string why = token.empty() ? "authentication required" : "wrong ZPS_AUTH_TOKEN";
    CHECK(contains(c.log(w), why));
    CHECK(contains(c.log(s), "refused a node"));
    CHECK(contains(c.log(s), why));
    CHECK_FALSE(contains(c.log(s), kToken));  // the secret is never logged
    c.waitAll(30s);
  }
}

TEST_CASE("auth: a node refuses a scheduler that cannot prove the token") {
  Cluster c(1, 1);
  c.setEnv("ZPS_RENDEZVOUS_TIMEOUT", "4");
  c.startScheduler();
  c.startServer();
  int w = c.startWorker(0, {"check", "--rounds", "1"}, {{"ZPS_AUTH_TOKEN", kToken}});
  CHECK(c.waitExit(w, 30s) != 0);
  CHECK(contains(c.log(w), "could not prove it knows ZPS_AUTH_TOKEN"));
  c.waitAll(30s);
}

TEST_CASE("auth: a short token or CURVE without a token is a user error") {
  Cluster c(1, 1);
  int a = c.start("zps", {c.bin()}, {{"DMLC_ROLE", "scheduler"}, {"ZPS_AUTH_TOKEN", "short"}});
  CHECK(c.waitExit(a, 20s) == 2);
  CHECK(contains(c.log(a), "shorter than 16"));
  int b = c.start("zps", {c.bin()}, {{"DMLC_ROLE", "server"}, {"ZPS_CURVE", "1"}});
  CHECK(c.waitExit(b, 20s) == 2);
  CHECK(contains(c.log(b), "ZPS_CURVE=1 needs ZPS_AUTH_TOKEN"));
}

TEST_CASE("auth: a HELLO whose reply was lost is answered again, its nonce from another connection is not") {
  // Servers drop 30% of their sends, HELLO replies included; the workers resend after 0.3 s with the
  // same nonce. Each job has 4 HELLOs (2 workers x 2 servers) and their push lanes: before resent
  // HELLOs were answered, about 3 jobs in 4 had one refused as "replayed nonce" and failed to join.
  for (int seed = 1; seed <= 3; ++seed) {
    Cluster c(2, 2);
    c.setEnv("ZPS_AUTH_TOKEN", kToken);
    c.setEnv("ZPS_RESEND_TIMEOUT", "0.3");
    c.startScheduler();
    const zps::testing::Env faults = {{"ZPS_TEST_FAULTS", "drop=0.3,seed=" + std::to_string(seed)}};
    int s0 = c.startServer(faults);
    int s1 = c.startServer(faults);
    int w0 = c.startWorker(0, {"check", "--rounds", "3", "--sizes", "4K"});
    int w1 = c.startWorker(1, {"check", "--rounds", "3", "--sizes", "4K"});
    INFO("seed " << seed << "\n" << c.logTail(w0) << c.logTail(w1) << c.logTail(s0) << c.logTail(s1));
    c.expectAllExitZero(90s);
    CHECK(contains(c.log(w0), " 0 wrong"));
    CHECK(contains(c.log(w1), " 0 wrong"));
    CHECK(!contains(c.log(s0) + c.log(s1), "replayed nonce"));
  }
}
