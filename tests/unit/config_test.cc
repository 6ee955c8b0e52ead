// Tests for configuration loading (ps/common/config.cc) with an injected environment: good settings
// for each role, every bad value rejected with a message that names the variable, and the strict
// integer/seconds parsers. The rank sources are node_identity_test.cc's.
#include <chrono>
#include <climits>
#include <map>
#include <optional>
#include <string>

#include <catch2/catch.hpp>

#include "ps/common/config.h"
#include "tests/unit/env_lookup.h"

namespace zps {
namespace {

using std::chrono::milliseconds;
using testing::Env;
using testing::lookup;

// A complete, valid environment. HOSTNAME is fixed so the real host name never leaks a rank in.
Env baseEnv(const std::string& role) {
  return {{"DMLC_ROLE", role},           {"DMLC_NUM_SERVER", "2"},         {"DMLC_NUM_WORKER", "3"},
          {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "10.0.0.1"}, {"DMLC_NODE_HOST", "10.0.0.5"},
          {"HOSTNAME", "testhost"}};
}

// Loads `env` and requires an InvalidArgument whose message contains `needle`.
void expectInvalid(const Env& env, const std::string& needle) {
  auto c = loadConfig(lookup(env));
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(c.status().message(), Catch::Contains(needle));
}

TEST_CASE("config: a good worker environment", "[config]") {
  auto c = loadConfig(lookup(baseEnv("worker")));
  REQUIRE(c.ok());
  CHECK(c->role == Role::kWorker);
  CHECK(c->num_servers == 2);
  CHECK(c->num_workers == 3);
  CHECK(c->root_port == 9000);
  CHECK(c->root_uri == "10.0.0.1");
  CHECK(c->node_host == "10.0.0.5");
  CHECK(c->node_port == 0);
  CHECK(c->hostname == "testhost");
  CHECK(c->requested_rank == -1);
  CHECK(c->rank_source == "arrival order");
  CHECK(c->rendezvous_timeout == milliseconds(300'000));
  CHECK(c->heartbeat_interval == milliseconds(5'000));
  CHECK(c->heartbeat_timeout == milliseconds(30'000));
  CHECK(c->partition_bytes == size_t{4} << 20);
  CHECK(c->server_engine_threads == 2);
  CHECK(c->max_message_bytes == size_t{1} << 30);
}

TEST_CASE("config: push pacing is left to zps unless set, and -1 makes it twice the push credit", "[config]") {
  auto c = loadConfig(lookup(baseEnv("server")));
  REQUIRE(c.ok());
  CHECK(c->push_pacing_bytes == 0);  // until the job's layout is known (job_layout_test)
  CHECK(c->automatic.pacing);
  Env env = baseEnv("server");
  env["ZPS_CREDIT_BYTES"] = "262144";
  env["ZPS_PUSH_PACING_BYTES"] = "-1";
  c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->push_pacing_bytes == 524288);
  env["ZPS_PUSH_PACING_BYTES"] = "100000";
  c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->push_pacing_bytes == 100000);
  env["ZPS_PUSH_PACING_BYTES"] = "-2";
  expectInvalid(env, "ZPS_PUSH_PACING_BYTES");
  env["ZPS_PUSH_PACING_BYTES"] = "lots";
  expectInvalid(env, "ZPS_PUSH_PACING_BYTES");
}

TEST_CASE("config: a good server environment", "[config]") {
  Env env = baseEnv("server");
  env["DMLC_PORT"] = "9100";
  env["ZPS_SERVER_ID"] = "1";
  env["ZPS_SERVER_ENGINE_THREADS"] = "4";
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->role == Role::kServer);
  CHECK(c->node_port == 9100);
  CHECK(c->requested_rank == 1);
  CHECK(c->rank_source == "ZPS_SERVER_ID");
  CHECK(c->server_engine_threads == 4);
}

TEST_CASE("config: a good scheduler environment needs no root URI", "[config]") {
  Env env = baseEnv("scheduler");
  env.erase("DMLC_PS_ROOT_URI");
  env["DMLC_WORKER_ID"] = "1";  // ignored by the scheduler
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->role == Role::kScheduler);
  CHECK(c->root_uri.empty());
  CHECK(c->root_port == 9000);
  CHECK(c->requested_rank == -1);
  env["DMLC_PS_ROOT_URI"] = "  10.9.9.9 ";
  auto c2 = loadConfig(lookup(env));
  REQUIRE(c2.ok());
  CHECK(c2->root_uri == "10.9.9.9");
}

TEST_CASE("config: an explicit role wins over DMLC_ROLE", "[config]") {
  Env env = baseEnv("worker");
  env.erase("DMLC_ROLE");
  auto c = loadConfig(lookup(env), Role::kServer);
  REQUIRE(c.ok());
  CHECK(c->role == Role::kServer);
  env["DMLC_ROLE"] = "worker";
  auto c2 = loadConfig(lookup(env), Role::kScheduler);
  REQUIRE(c2.ok());
  CHECK(c2->role == Role::kScheduler);
}

TEST_CASE("config: DMLC_ROLE is trimmed", "[config]") {
  auto c = loadConfig(lookup(baseEnv(" server\n")));
  REQUIRE(c.ok());
  CHECK(c->role == Role::kServer);
}

TEST_CASE("config: bad environments name the variable", "[config]") {
  SECTION("missing DMLC_ROLE") {
    Env env = baseEnv("worker");
    env.erase("DMLC_ROLE");
    expectInvalid(env, "DMLC_ROLE is not set");
  }
  SECTION("empty DMLC_ROLE") { expectInvalid(baseEnv("  "), "DMLC_ROLE is not set"); }
  SECTION("unknown DMLC_ROLE") { expectInvalid(baseEnv("master"), "DMLC_ROLE='master'"); }
  SECTION("upper-case DMLC_ROLE") { expectInvalid(baseEnv("Worker"), "DMLC_ROLE='Worker'"); }
  SECTION("missing DMLC_NUM_WORKER") {
    Env env = baseEnv("worker");
    env.erase("DMLC_NUM_WORKER");
    expectInvalid(env, "DMLC_NUM_WORKER is not set");
  }
  SECTION("missing DMLC_NUM_SERVER") {
    Env env = baseEnv("scheduler");
    env.erase("DMLC_NUM_SERVER");
    expectInvalid(env, "DMLC_NUM_SERVER is not set");
  }
  SECTION("non-numeric DMLC_NUM_WORKER") {
    for (const char* bad : {"abc", "2.5", "3x", "0x3", "99999999999999999999999"}) {
      INFO(bad);
      Env env = baseEnv("worker");
      env["DMLC_NUM_WORKER"] = bad;
      expectInvalid(env, std::string("DMLC_NUM_WORKER='") + bad + "' is not a whole number");
    }
  }
  SECTION("zero DMLC_NUM_WORKER") {
    Env env = baseEnv("worker");
    env["DMLC_NUM_WORKER"] = "0";
    expectInvalid(env, "DMLC_NUM_WORKER=0 is out of range");
  }
  SECTION("negative DMLC_NUM_WORKER") {
    Env env = baseEnv("server");
    env["DMLC_NUM_WORKER"] = "-2";
    expectInvalid(env, "DMLC_NUM_WORKER=-2 is out of range");
  }
  SECTION("zero DMLC_NUM_SERVER") {
    Env env = baseEnv("scheduler");
    env["DMLC_NUM_SERVER"] = "0";
    expectInvalid(env, "DMLC_NUM_SERVER=0 is out of range");
  }
  SECTION("DMLC_PS_ROOT_PORT=0") {
    Env env = baseEnv("scheduler");
    env["DMLC_PS_ROOT_PORT"] = "0";
    expectInvalid(env, "DMLC_PS_ROOT_PORT=0 is out of range [1, 65535]");
  }
  SECTION("DMLC_PS_ROOT_PORT=70000") {
    Env env = baseEnv("worker");
    env["DMLC_PS_ROOT_PORT"] = "70000";
    expectInvalid(env, "DMLC_PS_ROOT_PORT=70000 is out of range");
  }
  SECTION("DMLC_PS_ROOT_PORT=abc") {
    Env env = baseEnv("worker");
    env["DMLC_PS_ROOT_PORT"] = "abc";
    expectInvalid(env, "DMLC_PS_ROOT_PORT='abc' is not a whole number");
  }
  SECTION("missing DMLC_PS_ROOT_PORT") {
    Env env = baseEnv("worker");
    env.erase("DMLC_PS_ROOT_PORT");
    expectInvalid(env, "DMLC_PS_ROOT_PORT is not set");
  }
  SECTION("missing DMLC_PS_ROOT_URI for a worker") {
    Env env = baseEnv("worker");
    env.erase("DMLC_PS_ROOT_URI");
    expectInvalid(env, "DMLC_PS_ROOT_URI is not set");
  }
  SECTION("blank DMLC_PS_ROOT_URI for a server") {
    Env env = baseEnv("server");
    env["DMLC_PS_ROOT_URI"] = " ";
    expectInvalid(env, "DMLC_PS_ROOT_URI is not set");
  }
  SECTION("bad PORT") {
    Env env = baseEnv("server");
    env["PORT"] = "70000";
    expectInvalid(env, "PORT=70000 is out of range");
  }
  SECTION("bad PS_VERBOSE") {
    Env env = baseEnv("worker");
    env["PS_VERBOSE"] = "loud";
    expectInvalid(env, "PS_VERBOSE='loud'");
  }
  SECTION("bad ZPS_PARTITION_BYTES") {
    Env env = baseEnv("worker");
    env["ZPS_PARTITION_BYTES"] = "63";
    expectInvalid(env, "ZPS_PARTITION_BYTES=63 is out of range");
  }
  SECTION("partition larger than the largest message") {
    Env env = baseEnv("worker");
    env["ZPS_PARTITION_BYTES"] = "1048576";
    env["ZPS_MAX_MESSAGE_BYTES"] = "65536";
    expectInvalid(env, "ZPS_PARTITION_BYTES (1048576) exceeds ZPS_MAX_MESSAGE_BYTES (65536)");
  }
}

TEST_CASE("config: ports, verbosity and limits are read", "[config]") {
  Env env = baseEnv("server");
  env["PORT"] = "9200";
  env["PS_VERBOSE"] = "2";
  env["ZPS_PARTITION_BYTES"] = "65536";
  env["ZPS_MAX_MESSAGE_BYTES"] = "65536";
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->node_port == 9200);
  CHECK(c->verbose == 2);
  CHECK(c->partition_bytes == 65536);
  CHECK(c->max_message_bytes == 65536);
  env["DMLC_PORT"] = "9300";  // DMLC_PORT wins over PORT
  auto c2 = loadConfig(lookup(env));
  REQUIRE(c2.ok());
  CHECK(c2->node_port == 9300);
}

TEST_CASE("config: node host sources", "[config]") {
  SECTION("DMLC_NODE_HOST wins over DMLC_INTERFACE") {
    Env env = baseEnv("worker");
    env["DMLC_NODE_HOST"] = " 10.1.2.3 ";
    env["DMLC_INTERFACE"] = "no-such-interface0";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->node_host == "10.1.2.3");
  }
  SECTION("DMLC_INTERFACE=lo gives 127.0.0.1") {
    Env env = baseEnv("worker");
    env.erase("DMLC_NODE_HOST");
    env["DMLC_INTERFACE"] = "lo";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->node_host == "127.0.0.1");
  }
  SECTION("an unknown interface names the ones that exist") {
    Env env = baseEnv("worker");
    env.erase("DMLC_NODE_HOST");
    env["DMLC_INTERFACE"] = "no-such-interface0";
    auto c = loadConfig(lookup(env));
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(c.status().message(), Catch::Contains("DMLC_INTERFACE=no-such-interface0"));
    CHECK_THAT(c.status().message(), Catch::Contains("interfaces with one: "));
    CHECK_THAT(c.status().message(), Catch::Contains("lo"));
  }
  SECTION("no setting detects an address") {
    Env env = baseEnv("worker");
    env.erase("DMLC_NODE_HOST");
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->node_host == detectHostAddress());
    CHECK_FALSE(c->node_host.empty());
  }
  CHECK(interfaceAddress("lo").ok());
}

TEST_CASE("config: a bad rank variable is an error", "[config]") {
  Env env = baseEnv("worker");
  env["DMLC_WORKER_ID"] = "abc";
  expectInvalid(env, "DMLC_WORKER_ID='abc' is not a whole number");
}

TEST_CASE("config: loadConfig takes the rank from the environment or the hostname", "[config]") {
  Env env = baseEnv("worker");
  env["HOSTNAME"] = "job-worker-2";
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->hostname == "job-worker-2");
  CHECK(c->requested_rank == 2);
  CHECK(c->rank_source == "hostname job-worker-2");
  env["DMLC_WORKER_ID"] = "0";
  auto c2 = loadConfig(lookup(env));
  REQUIRE(c2.ok());
  CHECK(c2->requested_rank == 0);
  CHECK(c2->rank_source == "DMLC_WORKER_ID");
}

TEST_CASE("config: ZPS_RENDEZVOUS_TIMEOUT", "[config]") {
  Env env = baseEnv("worker");
  env["ZPS_RENDEZVOUS_TIMEOUT"] = "0.5";
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->rendezvous_timeout == milliseconds(500));
  env["ZPS_RENDEZVOUS_TIMEOUT"] = " 12 ";
  c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->rendezvous_timeout == milliseconds(12'000));
  env["ZPS_RENDEZVOUS_TIMEOUT"] = "abc";
  expectInvalid(env, "ZPS_RENDEZVOUS_TIMEOUT='abc' is not a number of seconds");
  env["ZPS_RENDEZVOUS_TIMEOUT"] = "-1";
  expectInvalid(env, "ZPS_RENDEZVOUS_TIMEOUT=-1 is out of range");
  env["ZPS_RENDEZVOUS_TIMEOUT"] = "";
  expectInvalid(env, "ZPS_RENDEZVOUS_TIMEOUT='' is not a number of seconds");
}

TEST_CASE("config: recovery and the server memory cap", "[config]") {
  Env env = baseEnv("server");
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK_FALSE(c->recovery);
  CHECK(c->recovery_timeout == milliseconds(300'000));
  CHECK(c->server_max_bytes == physicalMemoryBytes() / 2);
  env["ZPS_RECOVERY"] = "1";
  env["ZPS_RECOVERY_TIMEOUT"] = "20";
  env["ZPS_SERVER_MAX_BYTES"] = "1048576";
  c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  CHECK(c->recovery);
  CHECK(c->recovery_timeout == milliseconds(20'000));
  CHECK(c->server_max_bytes == 1048576);
  env["ZPS_RECOVERY"] = "yes";
  expectInvalid(env, "ZPS_RECOVERY='yes' is not a whole number");
  env["ZPS_RECOVERY"] = "1";
  env["ZPS_RECOVERY_TIMEOUT"] = "0";
  expectInvalid(env, "ZPS_RECOVERY_TIMEOUT must be more than 0");
  env["ZPS_RECOVERY_TIMEOUT"] = "20";
  // The machine's memory is the ceiling, for servers; a worker with the same environment is not refused.
  env["ZPS_SERVER_MAX_BYTES"] = std::to_string(physicalMemoryBytes() + 1);
  expectInvalid(env, "exceeds this machine's");
  env["DMLC_ROLE"] = "worker";
  CHECK(loadConfig(lookup(env)).ok());
  env["ZPS_SERVER_MAX_BYTES"] = "-5";
  expectInvalid(env, "ZPS_SERVER_MAX_BYTES=-5 is out of range");
}

TEST_CASE("config: heartbeat settings", "[config]") {
  SECTION("PS_HEARTBEAT_INTERVAL is an alias") {
    Env env = baseEnv("worker");
    env["PS_HEARTBEAT_INTERVAL"] = "2";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->heartbeat_interval == milliseconds(2000));
    env["ZPS_HEARTBEAT_INTERVAL"] = "3";  // the ZPS_ name wins
    c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->heartbeat_interval == milliseconds(3000));
  }
  SECTION("PS_HEARTBEAT_TIMEOUT is an alias") {
    Env env = baseEnv("server");
    env["PS_HEARTBEAT_TIMEOUT"] = "60";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->heartbeat_timeout == milliseconds(60'000));
  }
  SECTION("0 means the default") {
    Env env = baseEnv("worker");
    env["PS_HEARTBEAT_INTERVAL"] = "0";
    env["ZPS_HEARTBEAT_TIMEOUT"] = "0";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->heartbeat_interval == milliseconds(5000));
    CHECK(c->heartbeat_timeout == milliseconds(30000));
  }
  SECTION("a timeout under twice the interval is rejected") {
    Env env = baseEnv("worker");
    env["ZPS_HEARTBEAT_INTERVAL"] = "10";
    env["ZPS_HEARTBEAT_TIMEOUT"] = "19.999";
    expectInvalid(env,
                  "heartbeat timeout (19999 ms) must be at least twice the heartbeat "
                  "interval (10000 ms)");
    env["ZPS_HEARTBEAT_TIMEOUT"] = "20";
    auto c = loadConfig(lookup(env));
    REQUIRE(c.ok());
    CHECK(c->heartbeat_timeout == milliseconds(20'000));
  }
  SECTION("a long interval against the default timeout is rejected") {
    Env env = baseEnv("scheduler");
    env["PS_HEARTBEAT_INTERVAL"] = "16";
    expectInvalid(env, "ZPS_HEARTBEAT_TIMEOUT");
  }
}

TEST_CASE("config: parseInteger", "[config]") {
  auto ok = [](const std::string& v, long long min, long long max) {
    auto r = parseInteger("N", v, min, max, "");
    REQUIRE(r.ok());
    return *r;
  };
  auto bad = [](const std::string& v, long long min, long long max) {
    auto r = parseInteger("N", v, min, max, "a count, e.g. N=2");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::StartsWith("N"));
    CHECK_THAT(r.status().message(), Catch::EndsWith("; set it to a count, e.g. N=2"));
    return r.status().message();
  };
  CHECK(ok("42", 0, 100) == 42);
  CHECK(ok(" 42\n", 0, 100) == 42);
  CHECK(ok("+7", 0, 100) == 7);
  CHECK(ok("-5", -10, 10) == -5);
  CHECK(ok("0", 0, 0) == 0);
  CHECK(ok("100", 0, 100) == 100);
  CHECK(ok("9223372036854775807", 0, LLONG_MAX) == LLONG_MAX);
  CHECK_THAT(bad("", 0, 10), Catch::Contains("N is empty"));
  CHECK_THAT(bad("   ", 0, 10), Catch::Contains("N is empty"));
  CHECK_THAT(bad("101", 0, 100), Catch::Contains("N=101 is out of range [0, 100]"));
  CHECK_THAT(bad("-1", 0, 100), Catch::Contains("N=-1 is out of range [0, 100]"));
  CHECK_THAT(bad("12abc", 0, 100), Catch::Contains("N='12abc' is not a whole number"));
  CHECK_THAT(bad("1 2", 0, 100), Catch::Contains("is not a whole number"));
  CHECK_THAT(bad("1e3", 0, 10000), Catch::Contains("is not a whole number"));
  CHECK_THAT(bad("0x10", 0, 100), Catch::Contains("is not a whole number"));
  CHECK_THAT(bad("9223372036854775808", 0, LLONG_MAX), Catch::Contains("is not a whole number"));
  CHECK_THAT(bad("-", 0, 100), Catch::Contains("is not a whole number"));
  // Without a hint the message has no "set it to" part.
  auto r = parseInteger("N", "x", 0, 1, "");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "N='x' is not a whole number");
}

TEST_CASE("config: parseSeconds", "[config]") {
  auto ms = [](const std::string& v) {
    auto r = parseSeconds("T", v, "");
    REQUIRE(r.ok());
    return r->count();
  };
  auto bad = [](const std::string& v) {
    auto r = parseSeconds("T", v, "a number of seconds, e.g. T=30");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status().message(), Catch::EndsWith("; set it to a number of seconds, e.g. T=30"));
    return r.status().message();
  };
  CHECK(ms("0") == 0);
  CHECK(ms("0.5") == 500);
  CHECK(ms("1.5") == 1500);
  CHECK(ms(" 30 ") == 30'000);
  CHECK(ms("0.0015") == 2);  // rounded to the nearest millisecond
  CHECK(ms("1e-3") == 1);
  CHECK(ms("2592000") == 2'592'000'000LL);
  CHECK_THAT(bad(""), Catch::Contains("T='' is not a number of seconds"));
  CHECK_THAT(bad("abc"), Catch::Contains("T='abc' is not a number of seconds"));
  CHECK_THAT(bad("5s"), Catch::Contains("is not a number of seconds"));
  CHECK_THAT(bad("inf"), Catch::Contains("is not a number of seconds"));
  CHECK_THAT(bad("nan"), Catch::Contains("is not a number of seconds"));
  CHECK_THAT(bad("1e400"), Catch::Contains("is not a number of seconds"));
  CHECK_THAT(bad("-1"), Catch::Contains("T=-1 is out of range: use 0 or 0.001 to 2592000 seconds"));
  CHECK_THAT(bad("-0.001"), Catch::Contains("is out of range"));
  CHECK_THAT(bad("2592000.5"), Catch::Contains("is out of range"));
}

}  // namespace
}  // namespace zps
