// Local reduction over shared memory (worker/local/local_group.h): several processes per worker
// node, exact sums, one tensor's bytes on the network per node, no segments left behind, and a
// clear failure when a local rank dies. Also the server's engine selection (ZPS_SERVER_ENGINE).
#include <dirent.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>

#include "kernels/cuda_reducer.h"
#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

namespace {

// Entries of a folder (the local reducer's ZPS_SHM_DIR must be empty once the job is over).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename());
  return names;
}

// Two local ranks per node, with the reducer's folder in the test's own directory; returns that
// folder (ZPS_SHM_DIR), which must be empty once the job is over.
std::string twoLocalRanks(Cluster& c) {
  const std::string shm = c.dir() + "/shm";
  std::filesystem::create_directories(shm);
  c.setEnv("ZPS_SHM_DIR", shm);
  c.setEnv("ZPS_LOCAL_SIZE", "2");
  return shm;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += n + " ";
  return out;
}

}  // namespace

TEST_CASE(
    "local reduction: 2 nodes x 2 local ranks, exact sums, 1x tensor bytes on the network per "
    "node") {
  Cluster c(2, 2);
  const std::string shm = twoLocalRanks(c);
  c.startScheduler();
  c.startServer();
  c.startServer();
  std::vector<int> workers;
  const std::vector<std::string> args = {"check", "--rounds", "4"};
  for (int node = 0; node < 2; ++node) {
    // Local rank 1 through BytePS's name, to show both spellings are read.
    workers.push_back(c.startWorker(node, args, {{"ZPS_LOCAL_RANK", "0"}}));
    workers.push_back(c.startWorker(node, args, {{"BYTEPS_LOCAL_RANK", "1"}, {"BYTEPS_LOCAL_SIZE", "2"}}));
  }
  c.expectAllExitZero(240s);
  for (int w : workers) {
    INFO(c.logTail(w));
    CHECK(contains(c.log(w), " 0 wrong"));
  }
  // The root of each node reports the node's traffic: what it pushed equals one process's tensor
  // bytes (each tensor's bytes went over the network once, not once per local rank).
  const std::regex line(R"(node traffic over 2 local ranks: tensor bytes (\d+) pushed / (\d+) pulled per rank; )"
                        R"(network bytes (\d+) pushed / (\d+) pulled by the node)");
  for (int root : {workers[0], workers[2]}) {
    const std::string log = c.log(root);
    std::smatch m;
    INFO(c.logTail(root));
    REQUIRE(std::regex_search(log, m, line));
    CHECK(std::stoull(m[1]) > 0);
    CHECK(m[3] == m[1]);
    CHECK(m[4] == m[2]);
  }
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: several user threads per local rank get exact sums without a hang") {
  // Each of 4 threads per process push-pulls its own share of the tensors, so the two local ranks
  // issue their collectives in whatever order their threads happen to run: the worker must still
  // give both ranks one order (worker/local/local_group.h, inTurn).
  Cluster c(2, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_REQUEST_TIMEOUT", "20");
  c.startScheduler();
  c.startServer();
  c.startServer();
  const std::vector<std::string> args = {"check", "--rounds", "5", "--threads", "4", "--sizes", "1,4K,64K+3"};
  std::vector<int> workers;
  for (int rank = 0; rank < 2; ++rank)
    workers.push_back(c.startWorker(0, args, {{"ZPS_LOCAL_RANK", std::to_string(rank)}}));
  c.expectAllExitZero(120s);
  for (int w : workers) {
    INFO(c.logTail(w));
    CHECK(contains(c.log(w), "(4 threads)"));
    CHECK(contains(c.log(w), " 0 wrong"));
  }
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: local ranks that issue different operations all fail at once naming both") {
  // Local rank 0 push-pulls tensors 0 and 1 each round, local rank 1 only tensor 0: the node's
  // second local operation is tensor 1 on rank 0 and tensor 0 (of round 2) on rank 1. Rank 1 must
  // say so within ZPS_REQUEST_TIMEOUT and end the group, so that rank 0 fails too instead of
  // waiting in its collective.
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_REQUEST_TIMEOUT", "2");
  c.startScheduler();
  c.startServer();
  const std::vector<std::string> common = {"check", "--rounds", "3", "--dtypes", "float32"};
  std::vector<std::string> two_tensors = common, one_tensor = common;
  two_tensors.insert(two_tensors.end(), {"--sizes", "4K,8K"});
  one_tensor.insert(one_tensor.end(), {"--sizes", "4K"});
  const int root = c.startWorker(0, two_tensors, {{"ZPS_LOCAL_RANK", "0"}});
  const int peer = c.startWorker(0, one_tensor, {{"ZPS_LOCAL_RANK", "1"}});
  const std::string divergence =
      "local rank 0 runs CMD_PUSH_PULL of tensor 1 as the node's local operation 2, but no thread of local "
      "rank 1 issued it within 2 s (this one waits to run CMD_PUSH_PULL of tensor 0)";
  // Every process ends non-zero, well before the 10-minute staging deadline rank 0 waits under.
  c.expectAllExitNonZero(30s);
  INFO(c.logTail(peer));
  CHECK(contains(c.log(peer), divergence));
  INFO(c.logTail(root));
  CHECK(contains(c.log(root), "local group aborted: " + divergence));
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: a null buffer on one local rank ends the group and its peer fails at once naming it") {
  // Local rank 1 push-pulls from a null buffer (tests/integration/main.cc --null-buffer-worker). Its
  // peer is already in the collective and, with ZPS_REQUEST_TIMEOUT at 60 s, must not wait that long.
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_REQUEST_TIMEOUT", "60");
  c.startScheduler();
  c.startServer();
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::vector<int> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(
        c.start("worker0." + std::to_string(rank), {self, "--null-buffer-worker"},
                {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", "0"}, {"ZPS_LOCAL_RANK", std::to_string(rank)}}));
  }
  c.expectAllExitNonZero(30s);
  const std::string cause = "push with a null buffer (CMD_PUSH_PULL of tensor 0)";
  INFO(c.logTail(workers[1]));
  CHECK(contains(c.log(workers[1]), "null-buffer-worker local rank 1: " + cause));
  INFO(c.logTail(workers[0]));
  CHECK(contains(c.log(workers[0]),
                 "null-buffer-worker local rank 0: local barrier (staging a tensor): "
                 "local group aborted: local rank 1: " +
                     cause));
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: a crashed local rank leaves no segments and its peer fails clearly") {
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_TEST_LOCAL_CRASH", "1");
  c.startScheduler();
  c.startServer();
  const std::vector<std::string> args = {"check", "--rounds", "3", "--sizes", "4K,1M"};
  int root = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "0"}});
  int crasher = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "1"}});
  CHECK(c.waitExit(crasher, 60s) == 128 + SIGKILL);
  const int code = c.waitExit(root, 60s);
  INFO(c.logTail(root));
  CHECK(code != 0);
  CHECK(contains(c.log(root), "local rank 1 (pid " + std::to_string(c.pid(crasher)) + ") of this node died"));
  c.waitAll(60s);
  INFO("left in ZPS_SHM_DIR: " << joined(entries(shm)));
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: a crashed local root makes its peer exit non-zero") {
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_TEST_LOCAL_CRASH", "0");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.5");
  c.setEnv("ZPS_HEARTBEAT_TIMEOUT", "2");
  c.startScheduler();
  c.startServer();
  const std::vector<std::string> args = {"check", "--rounds", "3", "--sizes", "4K"};
  int root = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "0"}});
  int peer = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "1"}});
  CHECK(c.waitExit(root, 60s) == 128 + SIGKILL);
  const int code = c.waitExit(peer, 60s);
  INFO(c.logTail(peer));
  CHECK(code != 0);
  CHECK(contains(c.log(peer), "local rank 0 (pid " + std::to_string(c.pid(root)) + ") of this node died"));
  c.waitAll(60s);
  CHECK(entries(shm).empty());
}

TEST_CASE("local reduction: a local rank whose peers end the job and leave while it checks on them exits 0") {
  // The end-of-job race: local rank 1 sees that the job has not ended yet, then checks that its
  // peers live. ZPS_TEST_LOCAL_SLOW_EXIT holds it between the two checks while local rank 0 ends
  // the job and exits. A rank that left after the job's end is no dead peer: both exit 0.
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.startScheduler();
  c.startServer();
  const std::vector<std::string> args = {"check", "--rounds", "2", "--sizes", "4K"};
  const int root = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "0"}});
  const int peer = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "1"}, {"ZPS_TEST_LOCAL_SLOW_EXIT", "3000"}});
  CHECK(c.waitExit(root, 60s) == 0);
  const int code = c.waitExit(peer, 60s);
  INFO(c.logTail(peer));
  CHECK(code == 0);
  CHECK_FALSE(contains(c.log(peer), "died"));
  CHECK(contains(c.log(peer), " 0 wrong"));
  c.expectAllExitZero(60s);
  CHECK(entries(shm).empty());
}

TEST_CASE("ZPS_LOCAL_REDUCE=nccl without a usable GPU fails on every local rank, clearly and in time") {
  std::string why;
  if (zps::kernels::cudaDeviceAvailable(&why)) {
    WARN("a GPU is present: the NCCL reducer may work here; tools/gpu-check.sh covers it");
    return;
  }
  Cluster c(1, 1);
  const std::string shm = twoLocalRanks(c);
  c.setEnv("ZPS_LOCAL_REDUCE", "nccl");
  c.startScheduler();
  c.startServer();
  const std::vector<std::string> args = {"check", "--rounds", "2", "--sizes", "4K"};
  int root = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "0"}});
  int peer = c.startWorker(0, args, {{"ZPS_LOCAL_RANK", "1"}});
  for (int w : {root, peer}) {
    const int code = c.waitExit(w, 60s);
    INFO(c.logTail(w));
    CHECK(code != 0);
    // The build's own reason: no NCCL in this build, or no device for the CUDA runtime.
    CHECK((contains(c.log(w), "NCCL") || contains(c.log(w), "CUDA") || contains(c.log(w), "cuda")));
  }
  c.waitAll(60s);
  CHECK(entries(shm).empty());

  // GPU tensors cannot be made here at all: zps check --gpu_tensors says why, exit 2.
  int gpu_check = c.start("zps", {c.bin(), "check", "--gpu_tensors"}, {{"DMLC_ROLE", "worker"}});
  INFO(c.logTail(gpu_check));
  CHECK(c.waitExit(gpu_check, 20s) == 2);
  CHECK(contains(c.log(gpu_check), "--gpu_tensors but"));
}

TEST_CASE("zps launch --local-size starts N processes per worker node") {
  Cluster c(1, 1);
  const std::string shm = c.dir() + "/shm";
  std::filesystem::create_directories(shm);
  int p = c.start("launch",
                  {c.bin(), "launch", "--servers", "1", "--workers", "2", "--local-size", "3", "--", "check",
                   "--rounds", "2", "--sizes", "7,1M+3"},
                  {{"ZPS_SHM_DIR", shm}});
  const int code = c.waitExit(p, 120s);
  INFO(c.logTail(p, 80));
  CHECK(code == 0);
  for (const char* who : {"[worker 0.0]", "[worker 0.2]", "[worker 1.1]"}) CHECK(contains(c.log(p), who));
  CHECK(contains(c.log(p), "zps check: worker 1 local rank 2:"));
  CHECK(entries(shm).empty());

  int bad =
      c.start("launch", {c.bin(), "launch", "--servers", "1", "--workers", "1", "--local-size", "0", "--", "check"});
  CHECK(c.waitExit(bad, 20s) == 2);
}

TEST_CASE("bad local rank settings exit 2 naming the variable") {
  struct Case {
    zps::testing::Env env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{{"ZPS_LOCAL_SIZE", "2"}, {"ZPS_LOCAL_RANK", "2"}}, "ZPS_LOCAL_RANK=2 is not below the local size 2"},
      {{{"BYTEPS_LOCAL_SIZE", "two"}}, "BYTEPS_LOCAL_SIZE='two' is not a whole number"},
      {{{"ZPS_LOCAL_SIZE", "0"}}, "ZPS_LOCAL_SIZE=0 is out of range"},
      {{{"ZPS_SHM_DIR", "relative/dir"}}, "ZPS_SHM_DIR='relative/dir' must be an absolute path"},
  };
  for (const auto& tc : cases) {
    Cluster c(1, 1);
    zps::testing::Env env = tc.env;
    env.emplace_back("DMLC_ROLE", "worker");
    int p = c.start("zps", {c.bin(), "check"}, env);
    INFO(tc.message << "\n" << c.logTail(p));
    CHECK(c.waitExit(p, 20s) == 2);
    CHECK(contains(c.log(p), tc.message));
  }
}

TEST_CASE("ZPS_SERVER_ENGINE: auto falls back to the CPU without a GPU, cuda exits 2, bad names exit 2") {
  std::string why;
  const bool gpu = zps::kernels::cudaDeviceAvailable(&why);
  {
    Cluster c(1, 1);
    c.setEnv("ZPS_SERVER_ENGINE", "auto");
    c.startScheduler();
    int server = c.startServer();
    int worker = c.startWorker(0, {"check", "--rounds", "2", "--sizes", "4K,1M+3"});
    c.expectAllExitZero(120s);
    CHECK(contains(c.log(worker), " 0 wrong"));
    INFO(c.logTail(server));
    if (gpu) {
      CHECK(contains(c.log(server), "using the CUDA engine"));
      CHECK(contains(c.log(server), "(cuda reducer)"));
    } else {
      CHECK(contains(c.log(server), "; using the CPU engine"));
      CHECK(contains(c.log(server), "(cpu reducer)"));
    }
  }
  {
    Cluster c(1, 1);
    int p = c.start("zps", {c.bin()},
                    {{"DMLC_ROLE", "server"},
                     {"ZPS_SERVER_ENGINE", "cuda"},
                     {"ZPS_RENDEZVOUS_TIMEOUT", "5"},
                     {"ZPS_CONNECT_TIMEOUT", "5"}});
    const int code = c.waitExit(p, 30s);
    INFO(c.logTail(p));
    if (gpu) {
      WARN("a GPU is present: ZPS_SERVER_ENGINE=cuda cannot be refused here; only the CPU case ran");
    } else {
      CHECK(code == 2);
      CHECK(contains(c.log(p), "ZPS_SERVER_ENGINE=cuda but"));
    }
  }
  {
    Cluster c(1, 1);
    int p = c.start("zps", {c.bin()}, {{"DMLC_ROLE", "server"}, {"ZPS_SERVER_ENGINE", "gpu"}});
    INFO(c.logTail(p));
    CHECK(c.waitExit(p, 20s) == 2);
    CHECK(contains(c.log(p), "ZPS_SERVER_ENGINE='gpu' is not an engine"));
  }
}

TEST_CASE(
    "zps version --gpu reports the build, the driver, each GPU, cuBLAS and NCCL, and exits 1 without a usable GPU") {
  Cluster c(1, 1);
  int p = c.start("zps", {c.bin(), "version", "--gpu"}, {});
  const int code = c.waitExit(p, 60s);
  const std::string out = c.log(p);
  INFO(out);
  CHECK(contains(out, "zps 0.1.0"));
#ifdef ZPS_HAVE_CUDA
  std::string why;
  const bool gpu = zps::kernels::cudaDeviceAvailable(&why);
  CHECK(contains(out, "build: CUDA runtime "));
  CHECK(contains(out, "devices: "));
  CHECK(contains(out, "cuBLAS: "));
  if (gpu) {
    CHECK(contains(out, "runs this build's kernels"));
  } else {
    CHECK(contains(out, "none usable: " + why));
  }
  CHECK(code == (gpu && contains(out, "cuBLAS: loads from") ? 0 : 1));
  CHECK(contains(out, code == 0 ? "gpu: usable" : "gpu: not usable"));
#else
  CHECK(contains(out, "build: this zps build has no CUDA"));
  CHECK(contains(out, "gpu: not usable"));
  CHECK(code == 1);
#endif
}
