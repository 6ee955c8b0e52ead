// zps launch: a fresh token per job, nodes that start only once the job's own scheduler listens (so
// they never join another job's scheduler on --port), and exit code 2 for every user error.
#include <catch2/catch.hpp>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

TEST_CASE("launch safety: a job without a token gets a fresh one") {
  Cluster c(1, 1);
  int l = c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "1", "--", "check", "--rounds", "2"},
                  {{"ZPS_AUTH_TOKEN", ""}, {"ZPS_AUTH_TOKEN_FILE", ""}});
  CHECK(c.waitExit(l, 60s) == 0);
  CHECK(contains(c.log(l), "scheduler: nodes must prove ZPS_AUTH_TOKEN"));
  CHECK(contains(c.log(l), " 0 wrong"));
}

TEST_CASE("launch safety: --port of another job's scheduler starts no node and exits 2") {
  Cluster c(1, 1);
  int other = c.startScheduler();  // another job, waiting for its own nodes
  REQUIRE(c.waitForLog(other, "scheduler listening", 20s));
  int l = c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "1", "--port", std::to_string(c.port()),
                             "--", "check", "--rounds", "2"});
  INFO(c.logTail(l));
  CHECK(c.waitExit(l, 60s) == 2);
  CHECK(contains(c.log(l), "no node was started"));
  CHECK_FALSE(contains(c.log(l), "[server 0]"));
  CHECK_FALSE(contains(c.log(other), "registered"));
  CHECK(c.running(other));
}

TEST_CASE("launch safety: the same user error exits 2 every time") {
  Cluster c(1, 1);
  for (int i = 0; i < 3; ++i) {
    int bad_env = c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "2", "--", "check"},
                          {{"ZPS_COMPRESSOR", "bogus"}});
    int bad_flag =
        c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "2", "--", "check", "--rounds", "abc"});
    INFO(c.logTail(bad_env) << c.logTail(bad_flag));
    CHECK(c.waitExit(bad_env, 60s) == 2);
    CHECK(contains(c.log(bad_env), "ZPS_COMPRESSOR"));
    CHECK(c.waitExit(bad_flag, 60s) == 2);
  }
}
