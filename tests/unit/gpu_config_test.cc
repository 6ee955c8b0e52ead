// The GPU path's settings and selection logic, without a GPU: ZPS_SERVER_ENGINE and the local
// rank variables in ps/common/config.cc, the server's engine choice (kernels/reducer_factory.h)
// and zps train's device choice (train/device.h). On a machine with a usable GPU the "no
// GPU" branches cannot run; those checks then say so instead of passing silently.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>

#include "kernels/cuda_reducer.h"
#include "kernels/reducer_factory.h"
#include "ps/common/config.h"
#include "tests/unit/env_lookup.h"
#include "train/device.h"

namespace zps {
namespace {

using testing::Env;
using testing::lookup;

Env workerEnv() {
  return {{"DMLC_ROLE", "worker"},           {"DMLC_NUM_SERVER", "1"},      {"DMLC_NUM_WORKER", "1"},
          {"DMLC_PS_ROOT_URI", "127.0.0.1"}, {"DMLC_PS_ROOT_PORT", "9000"}, {"HOSTNAME", "test"}};
}

StatusOr<Config> load(Env extra) {
  Env env = workerEnv();
  for (auto& [k, v] : extra) env[k] = v;
  return loadConfig(lookup(env));
}

TEST_CASE("gpu config: defaults are the CPU-safe ones") {
  auto c = load({});
  REQUIRE(c.ok());
  CHECK(c->server_engine == "auto");
  CHECK(c->local_rank == 0);
  CHECK(c->local_size == 1);
  CHECK(c->shm_dir == "/dev/shm");
  CHECK(c->local_reduce == "auto");
  for (const char* backend : {"shm", "nccl"}) {
    c = load({{"ZPS_LOCAL_REDUCE", backend}});
    REQUIRE(c.ok());
    CHECK(c->local_reduce == backend);
  }
}

TEST_CASE("gpu config: ZPS_* and BYTEPS_* local ranks, ZPS_* first") {
  auto c = load({{"BYTEPS_LOCAL_RANK", "3"}, {"BYTEPS_LOCAL_SIZE", "4"}});
  REQUIRE(c.ok());
  CHECK(c->local_rank == 3);
  CHECK(c->local_size == 4);
  c = load({{"ZPS_LOCAL_RANK", "1"}, {"BYTEPS_LOCAL_RANK", "3"}, {"ZPS_LOCAL_SIZE", "2"}, {"BYTEPS_LOCAL_SIZE", "4"}});
  REQUIRE(c.ok());
  CHECK(c->local_rank == 1);
  CHECK(c->local_size == 2);
  c = load({{"ZPS_SERVER_ENGINE", " cuda "}, {"ZPS_SHM_DIR", "/tmp/x"}});
  REQUIRE(c.ok());
  CHECK(c->server_engine == "cuda");
  CHECK(c->shm_dir == "/tmp/x");
}

TEST_CASE("gpu config: bad values name the variable") {
  const std::map<std::string, Env> cases = {
      {"ZPS_SERVER_ENGINE='gpu' is not an engine", {{"ZPS_SERVER_ENGINE", "gpu"}}},
      {"ZPS_LOCAL_SIZE=0 is out of range", {{"ZPS_LOCAL_SIZE", "0"}}},
      {"BYTEPS_LOCAL_SIZE='x' is not a whole number", {{"BYTEPS_LOCAL_SIZE", "x"}}},
      {"ZPS_LOCAL_RANK=2 is not below the local size 2", {{"ZPS_LOCAL_SIZE", "2"}, {"ZPS_LOCAL_RANK", "2"}}},
      {"BYTEPS_LOCAL_RANK=1 is not below the local size 1", {{"BYTEPS_LOCAL_RANK", "1"}}},
      {"ZPS_LOCAL_RANK=-1 is out of range", {{"ZPS_LOCAL_RANK", "-1"}}},
      {"ZPS_SHM_DIR='shm' must be an absolute path", {{"ZPS_SHM_DIR", "shm"}}},
      {"ZPS_LOCAL_REDUCE='gpu' is not a local reduction backend", {{"ZPS_LOCAL_REDUCE", "gpu"}}},
  };
  for (const auto& [message, env] : cases) {
    auto c = load(env);
    INFO(message);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().code() == StatusCode::kInvalidArgument);
    CHECK(c.status().message().find(message) != std::string::npos);
  }
}

TEST_CASE("engine choice: cpu always, auto falls back, cuda needs a GPU, bad names refused") {
  auto cpu = kernels::chooseReducer("cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->kind == kernels::ReducerKind::kCpu);
  CHECK(cpu->note.empty());
  auto reducer = kernels::makeReducer(kernels::ReducerKind::kCpu, 0);
  REQUIRE(reducer.ok());
  CHECK(std::string((*reducer)->name()) == "cpu");

  auto bad = kernels::chooseReducer("gpu");
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);

  std::string why;
  const bool gpu = kernels::cudaDeviceAvailable(&why);
  auto automatic = kernels::chooseReducer("auto");
  auto cuda = kernels::chooseReducer("cuda");
  REQUIRE(automatic.ok());
  if (gpu) {
    WARN("a GPU is usable here: checked that auto and cuda choose it");
    CHECK(automatic->kind == kernels::ReducerKind::kCuda);
    REQUIRE(cuda.ok());
    CHECK(cuda->kind == kernels::ReducerKind::kCuda);
  } else {
    CHECK(automatic->kind == kernels::ReducerKind::kCpu);
    CHECK(automatic->note.find("using the CPU engine") != std::string::npos);
    CHECK(automatic->note.find(why) != std::string::npos);
    REQUIRE_FALSE(cuda.ok());
    CHECK(cuda.status().code() == StatusCode::kUnavailable);
    CHECK(cuda.status().message().find("ZPS_SERVER_ENGINE=cuda but") != std::string::npos);
    CHECK_FALSE(kernels::makeReducer(kernels::ReducerKind::kCuda, 0).ok());
  }
}

TEST_CASE("train device choice: cpu, auto fallback, cuda without a GPU, bad names") {
  auto cpu = train::openTrainDevice("cpu", 0);
  REQUIRE(cpu.ok());
  CHECK(cpu->description.find("OpenBLAS") != std::string::npos);
  CHECK(train::openTrainDevice("tpu", 0).status().code() == StatusCode::kInvalidArgument);
  std::string why;
  if (kernels::cudaDeviceAvailable(&why)) {
    WARN("a GPU is usable here: the no-GPU branches of --device were not checked");
  } else {
    auto automatic = train::openTrainDevice("auto", 0);
    REQUIRE(automatic.ok());
    CHECK(automatic->description.find("found no GPU") != std::string::npos);
    CHECK(automatic->owned == nullptr);
    auto cuda = train::openTrainDevice("cuda", 0);
    CHECK(cuda.status().code() == StatusCode::kUnavailable);
  }
}

}  // namespace
}  // namespace zps
