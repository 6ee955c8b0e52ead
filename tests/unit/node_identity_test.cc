// Tests for a node's identity (ps/common/node_identity.cc): the rank it asks for from each source in
// priority order (flag, environment, hostname), bad rank variables, and role names.
#include <string>

#include <catch2/catch.hpp>

#include "ps/common/node_identity.h"
#include "tests/unit/env_lookup.h"

namespace zps {
namespace {

using testing::Env;
using testing::lookup;

TEST_CASE("node identity: resolveRequestedRank priority", "[node_identity]") {
  int rank = 0;
  std::string source;
  Env env = {{"DMLC_WORKER_ID", "1"}, {"JOB_COMPLETION_INDEX", "2"}, {"VC_TASK_INDEX", "3"}, {"ZPS_SERVER_ID", "4"}};
  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 8, "job-worker-5", &rank, &source).ok());
  CHECK(rank == 1);
  CHECK(source == "DMLC_WORKER_ID");

  env.erase("DMLC_WORKER_ID");
  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 8, "job-worker-5", &rank, &source).ok());
  CHECK(rank == 2);
  CHECK(source == "JOB_COMPLETION_INDEX");

  env.erase("JOB_COMPLETION_INDEX");
  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 8, "job-worker-5", &rank, &source).ok());
  CHECK(rank == 3);
  CHECK(source == "VC_TASK_INDEX");

  env.erase("VC_TASK_INDEX");
  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 8, "job-worker-5", &rank, &source).ok());
  CHECK(rank == 5);
  CHECK(source == "hostname job-worker-5");

  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 8, "testhost", &rank, &source).ok());
  CHECK(rank == -1);
  CHECK(source == "arrival order");
}

TEST_CASE("node identity: an empty rank variable falls through to the next one", "[node_identity]") {
  int rank = 0;
  std::string source;
  Env env = {{"DMLC_WORKER_ID", " "}, {"VC_TASK_INDEX", "2"}};
  REQUIRE(resolveRequestedRank(lookup(env), Role::kWorker, 4, "h", &rank, &source).ok());
  CHECK(rank == 2);
  CHECK(source == "VC_TASK_INDEX");
}

TEST_CASE("node identity: server ranks ignore DMLC_WORKER_ID and the hostname", "[node_identity]") {
  int rank = 0;
  std::string source;
  Env env = {{"DMLC_WORKER_ID", "1"}, {"JOB_COMPLETION_INDEX", "2"}};
  REQUIRE(resolveRequestedRank(lookup(env), Role::kServer, 4, "job-server-3", &rank, &source).ok());
  CHECK(rank == 2);
  CHECK(source == "JOB_COMPLETION_INDEX");
  env["ZPS_SERVER_ID"] = "0";
  REQUIRE(resolveRequestedRank(lookup(env), Role::kServer, 4, "job-server-3", &rank, &source).ok());
  CHECK(rank == 0);
  CHECK(source == "ZPS_SERVER_ID");
  REQUIRE(resolveRequestedRank(lookup({}), Role::kServer, 4, "job-server-3", &rank, &source).ok());
  CHECK(rank == -1);
  CHECK(source == "arrival order");
}

TEST_CASE("node identity: --server_id on the command line wins over the environment's server rank", "[node_identity]") {
  FlagValuesSaver restore_flags;
  int rank = 0;
  std::string source;
  Env env = {{"ZPS_SERVER_ID", "0"}, {"JOB_COMPLETION_INDEX", "2"}};
  REQUIRE(setFlagValue("server_id", "3").ok());
  REQUIRE(resolveRequestedRank(lookup(env), Role::kServer, 4, "job-server-1", &rank, &source).ok());
  CHECK(rank == 3);
  CHECK(source == "--server_id");
  // A worker's rank does not come from --server_id.
  REQUIRE(resolveRequestedRank(lookup({}), Role::kWorker, 4, "h", &rank, &source).ok());
  CHECK(rank == -1);
}

TEST_CASE("node identity: hostname ranks", "[node_identity]") {
  int rank = 0;
  std::string source;
  auto fromHost = [&](const std::string& hostname, int num_workers) {
    REQUIRE(resolveRequestedRank(lookup({}), Role::kWorker, num_workers, hostname, &rank, &source).ok());
    return rank;
  };
  CHECK(fromHost("job-worker-3", 4) == 3);
  CHECK(source == "hostname job-worker-3");
  CHECK(fromHost("job-worker-0", 1) == 0);
  CHECK(fromHost("job-worker-3", 3) == -1);  // a guess >= num_workers is ignored
  CHECK(source == "arrival order");
  CHECK(fromHost("job-worker-30", 4) == -1);
  CHECK(fromHost("job-worker-", 4) == -1);
  CHECK(fromHost("job-worker-3a", 4) == -1);
  CHECK(fromHost("worker3", 4) == -1);
  CHECK(fromHost("", 4) == -1);
  CHECK(fromHost("job-worker-1234567", 1 << 30) == -1);  // too many digits to be a rank
  CHECK(fromHost("job-worker-123456", 1 << 30) == 123456);
}

TEST_CASE("node identity: an explicit rank beyond the job size is kept", "[node_identity]") {
  int rank = 0;
  std::string source;
  REQUIRE(resolveRequestedRank(lookup({{"DMLC_WORKER_ID", "7"}}), Role::kWorker, 3, "h", &rank, &source).ok());
  CHECK(rank == 7);  // the scheduler refuses it with a clear message
  CHECK(source == "DMLC_WORKER_ID");
}

TEST_CASE("node identity: bad rank variables are errors", "[node_identity]") {
  int rank = 0;
  std::string source;
  for (const char* bad : {"abc", "1.0", "-1", "one"}) {
    INFO(bad);
    Status s = resolveRequestedRank(lookup({{"DMLC_WORKER_ID", bad}}), Role::kWorker, 3, "h", &rank, &source);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::Contains("DMLC_WORKER_ID"));
  }
  Status s = resolveRequestedRank(lookup({{"JOB_COMPLETION_INDEX", "x"}}), Role::kServer, 3, "h", &rank, &source);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("JOB_COMPLETION_INDEX='x'"));
}

TEST_CASE("node identity: roleName", "[node_identity]") {
  CHECK(std::string(roleName(Role::kScheduler)) == "scheduler");
  CHECK(std::string(roleName(Role::kServer)) == "server");
  CHECK(std::string(roleName(Role::kWorker)) == "worker");
}

}  // namespace
}  // namespace zps
