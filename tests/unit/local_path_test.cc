// Tests for LocalPath (worker/local_path.h) without a network: each process of a node is a thread
// here with its own fake servers (tests/unit/instant_servers.h), and the node's local ranks share a
// real LocalGroup in a temporary folder. Covered: one local rank goes straight to the servers; two
// local ranks push only their own pieces and all end with the node's sum; a null buffer ends the
// group for every local rank, naming the cause; an announced recovery refuses new operations
// without ending the group; a process set's tensor skips the local reduction.
#include "worker/local_path.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/instant_servers.h"

namespace zps {
namespace {

using namespace std::chrono_literals;
using testing::InstantServers;

constexpr size_t kFloats = 8;  // the tensor "w": 2 partitions of 4 floats on 2 servers

// Fake servers that answer a push-pull with the floats it pushed (so a node's pulled result is the
// sum its local ranks pushed), and record how many floats each request pushed.
struct EchoServers : InstantServers {
  std::vector<size_t> pushed_floats;
  EchoServers() {
    payload = [this](int, const wire::DataMessage& m) {
      std::vector<float> v(m.payload.size() / sizeof(float));
      if (!v.empty()) std::memcpy(v.data(), m.payload.data(), m.payload.size());
      if (!m.data.has_declare()) pushed_floats.push_back(v.size());
      return v;
    };
  }
};

Config nodeConfig(int local_rank, int local_size, const std::string& shm_dir) {
  Config c;
  c.num_servers = 2;
  c.partition_bytes = 4 * sizeof(float);
  c.local_rank = local_rank;
  c.local_size = local_size;
  c.shm_dir = shm_dir;
  // The group's folder (in shm_dir, which each Node makes its own) is named after these and the node.
  c.root_uri = "local-path-test";
  c.root_port = 1;
  c.rendezvous_timeout = 10s;
  c.request_timeout = 10s;
  return c;
}

// One process of a node: its servers, tensors, recovery state, and the LocalPath over them.
struct Process {
  Config config;
  EchoServers servers;
  DenseTensors tensors{config, 0, &servers.table};
  RecoveryState recovery{&servers.table};
  std::unique_ptr<LocalGroup> group;  // null with one local rank
  std::unique_ptr<LocalPath> path;
  TensorId id = -1;

  explicit Process(Config c) : config(std::move(c)) {}

  // Joins the node's group (blocks until every local rank has), declares "w" and makes the path.
  Status start() {
    if (config.local_size > 1) {
      auto joined = LocalGroup::join(config, "node-0");
      if (!joined.ok()) return joined.status();
      group = std::move(joined).value();
    }
    auto declared = tensors.declare("w", kFloats * sizeof(float), DType::kFloat32, false, DeclareOptions());
    if (!declared.ok()) return declared.status();
    id = *declared;
    servers.pushed_floats.clear();
    path = std::make_unique<LocalPath>(config, 0, group.get(), nullptr, &tensors, &servers.table, &servers.waiter,
                                       &recovery);
    return Status::OK();
  }

  // A push-pull of `in` into `out` through the path, waited for.
  Status pushPull(const float* in, float* out) {
    auto handle = path->route(id, pb::CMD_PUSH_PULL, in, out);
    if (!handle.ok()) return handle.status();
    return servers.table.wait(*handle, 10s);
  }
};

// The processes of one node, each started on its own thread (joining a group is collective).
struct Node {
  std::filesystem::path shm = std::filesystem::temp_directory_path() /
                              ("zps-local-path-test-" + std::to_string(getpid()) + "-" + std::to_string(counter()++));
  std::vector<std::unique_ptr<Process>> processes;

  static std::atomic<int>& counter() {
    static std::atomic<int> n{0};
    return n;
  }

  explicit Node(int size) {
    std::filesystem::create_directories(shm);
    for (int r = 0; r < size; ++r) processes.push_back(std::make_unique<Process>(nodeConfig(r, size, shm.string())));
    std::vector<Status> started = onEveryRank([](Process& p) { return p.start(); });
    for (const Status& s : started) REQUIRE(s.ok());
  }
  ~Node() {
    processes.clear();
    std::error_code ignored;
    std::filesystem::remove_all(shm, ignored);
  }

  // Runs `body` for every local rank at once, one thread each; the statuses in rank order.
  std::vector<Status> onEveryRank(const std::function<Status(Process&)>& body) {
    std::vector<Status> statuses(processes.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < processes.size(); ++r) threads.emplace_back([&, r] { statuses[r] = body(*processes[r]); });
    for (auto& t : threads) t.join();
    return statuses;
  }
};

TEST_CASE("local path: one local rank with host tensors goes straight to the servers", "[local_path]") {
  Node node(1);
  Process& p = *node.processes[0];
  std::vector<float> in(kFloats), out(kFloats, 0.0f);
  for (size_t i = 0; i < kFloats; ++i) in[i] = static_cast<float>(i + 1);
  REQUIRE(p.pushPull(in.data(), out.data()).ok());
  CHECK(out == in);
  // One request per partition, each with its own 4 floats: no local step in between.
  CHECK(p.servers.pushed_floats == std::vector<size_t>{4, 4});
}

TEST_CASE("local path: two local ranks each push only their own pieces and both get the node's sum", "[local_path]") {
  Node node(2);
  for (int round = 1; round <= 3; ++round) {
    INFO("round " << round);
    std::vector<std::vector<float>> outs(2, std::vector<float>(kFloats, -1.0f));
    for (auto& p : node.processes) p->servers.pushed_floats.clear();
    auto statuses = node.onEveryRank([&](Process& p) {
      std::vector<float> in(kFloats);
      for (size_t i = 0; i < kFloats; ++i) in[i] = static_cast<float>((p.config.local_rank + 1) * round * 100 + i);
      return p.pushPull(in.data(), outs[p.config.local_rank].data());
    });
    for (const Status& s : statuses) CHECK(s.ok());
    std::vector<float> sum(kFloats);
    for (size_t i = 0; i < kFloats; ++i) sum[i] = static_cast<float>(3 * round * 100 + 2 * i);
    CHECK(outs[0] == sum);
    CHECK(outs[1] == sum);
    // A node sends each tensor byte once: the ranks' pushes cover the tensor between them.
    size_t total = 0;
    for (auto& p : node.processes) {
      CHECK_FALSE(p->servers.pushed_floats.empty());
      for (size_t n : p->servers.pushed_floats) total += n;
    }
    CHECK(total == kFloats);
  }
}

TEST_CASE("local path: a process set's tensor goes straight to the servers from one local rank alone", "[local_path]") {
  Node node(2);
  for (auto& p : node.processes) p->config.num_workers = 1;
  // Local rank 1 alone is in a process set: it declares and pushes the set's tensor while local rank
  // 0 issues nothing. Its whole tensor goes out (both partitions), not a piece of a local reduction.
  Process& member = *node.processes[1];
  DeclareOptions in_set;
  in_set.key_space = 1;
  in_set.contributors = 1;
  auto set_tensor = member.tensors.declare("s", kFloats * sizeof(float), DType::kFloat32, false, in_set);
  REQUIRE(set_tensor.ok());
  member.servers.pushed_floats.clear();
  std::vector<float> in(kFloats), out(kFloats, -1.0f);
  for (size_t i = 0; i < kFloats; ++i) in[i] = static_cast<float>(i + 1);
  auto handle = member.path->route(*set_tensor, pb::CMD_PUSH_PULL, in.data(), out.data());
  REQUIRE(handle.ok());
  REQUIRE(member.servers.table.wait(*handle, 10s).ok());
  CHECK(out == in);
  CHECK(member.servers.pushed_floats == std::vector<size_t>{4, 4});
  // A tensor of every worker declared next has id 2 on local rank 1 but 1 on local rank 0: the node
  // still reduces it together (its local operation is matched by its place among every worker's).
  auto statuses = node.onEveryRank([&](Process& p) {
    auto g = p.tensors.declare("g", kFloats * sizeof(float), DType::kFloat32, false, DeclareOptions());
    if (!g.ok()) return g.status();
    p.id = *g;
    std::vector<float> mine(kFloats, static_cast<float>(p.config.local_rank + 1)), sum(kFloats);
    Status s = p.pushPull(mine.data(), sum.data());
    if (s.ok() && sum != std::vector<float>(kFloats, 3.0f)) return InternalError("not the node's sum");
    return s;
  });
  CHECK(node.processes[0]->id == 1);
  CHECK(node.processes[1]->id == 2);
  for (const Status& s : statuses) CHECK(s.ok());
}

TEST_CASE("local path: a push with a null buffer ends the group for every local rank, naming it", "[local_path]") {
  Node node(2);
  auto statuses = node.onEveryRank([](Process& p) {
    std::vector<float> in(kFloats, 1.0f), out(kFloats);
    const float* mine = p.config.local_rank == 1 ? nullptr : in.data();
    return p.pushPull(mine, out.data());
  });
  CHECK(statuses[1].code() == StatusCode::kInvalidArgument);
  CHECK_THAT(statuses[1].message(), Catch::Contains("push with a null buffer (CMD_PUSH_PULL of tensor 0)"));
  CHECK_FALSE(statuses[0].ok());
  CHECK_THAT(statuses[0].message(), Catch::Contains("push with a null buffer"));
  for (auto& p : node.processes) {
    Status health = p->group->health();
    CHECK_FALSE(health.ok());
    CHECK_THAT(health.message(), Catch::Contains("local rank 1: push with a null buffer"));
  }
}

TEST_CASE("local path: an announced recovery refuses new local operations and keeps the group", "[local_path]") {
  Node node(2);
  node.processes[0]->group->announceRecovery(2, "worker 1 was lost");
  auto statuses = node.onEveryRank([](Process& p) {
    std::vector<float> in(kFloats, 1.0f), out(kFloats);
    return p.pushPull(in.data(), out.data());
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    INFO("local rank " << r);
    CHECK(statuses[r].code() == StatusCode::kUnavailable);
    CHECK_THAT(statuses[r].message(), Catch::Contains("recovering: worker 1 was lost"));
    CHECK(node.processes[r]->recovery.recovering());
    CHECK(node.processes[r]->group->health().ok());
    CHECK(node.processes[r]->servers.pushed_floats.empty());
  }
}

}  // namespace
}  // namespace zps
