// Tests for DenseTensors (worker/dense_tensors.h): declaring tensors, one request per partition,
// rounds per side, received_through, and the round a cancelled operation gives back.
#include "worker/dense_tensors.h"

#include <catch2/catch.hpp>
#include <vector>

#include "tests/unit/instant_servers.h"

namespace zps {
namespace {

using namespace std::chrono_literals;

using testing::InstantServers;

// A tensor "w" of 8 floats in 2 partitions on 2 servers, whose pulls return the round number.
Config twoServers() {
  Config c;
  c.num_servers = 2;
  c.partition_bytes = 16;  // 4 floats per partition
  return c;
}

struct OneTensor {
  InstantServers f;
  Config config = twoServers();
  DenseTensors tensors{config, 0, &f.table};
  TensorId id = -1;

  OneTensor() {
    f.payload = [](int, const wire::DataMessage& m) {
      const auto command = wire::commandOf(m.data);
      const bool pull = command == pb::CMD_PULL || command == pb::CMD_PUSH_PULL;
      return std::vector<float>(pull ? m.data.tensor().num_elements() : 0, static_cast<float>(wire::roundOf(m.data)));
    };
    auto declared = tensors.declare("w", 8 * sizeof(float), DType::kFloat32, false, DeclareOptions());
    REQUIRE(declared.ok());
    id = *declared;
  }
};

TEST_CASE("dense tensors: a tensor's partitions each get a request per round", "[dense_tensors]") {
  OneTensor t;
  auto& [f, config, tensors, id] = t;
  REQUIRE(f.seen.size() == 2);
  CHECK(wire::commandOf(f.seen[0]) == pb::CMD_DECLARE);
  CHECK(tensors.partitions(id).size() == 2);
  std::vector<float> in(8, 1.0f), out(8, 0.0f);
  for (uint64_t round = 1; round <= 3; ++round) {
    f.seen.clear();
    auto h = tensors.issue(id, pb::CMD_PUSH_PULL, in.data(), out.data());
    REQUIRE(h.ok());
    CHECK(f.table.wait(*h, 1s).ok());
    CHECK(out == std::vector<float>(8, static_cast<float>(round)));
    REQUIRE(f.seen.size() == 2);
    CHECK(wire::roundOf(f.seen[0]) == round);
    // Every earlier round was answered on both sides: the servers may free it.
    CHECK(f.seen[0].tensor().received_through() == round - 1);
  }
  CHECK(tensors.issue(id, pb::CMD_PUSH, nullptr, nullptr).status().code() == StatusCode::kInvalidArgument);
  CHECK(tensors.issue(7, pb::CMD_PULL, nullptr, out.data()).status().message() == "tensor id 7 was not declared");
}

TEST_CASE("dense tensors: a cancelled pull is retried by the next pull", "[dense_tensors]") {
  OneTensor t;
  auto& [f, config, tensors, id] = t;
  std::vector<float> out(8, 0.0f);
  f.silent = true;
  auto h = tensors.issue(id, pb::CMD_PULL, nullptr, out.data());
  REQUIRE(h.ok());
  Status s = f.table.wait(*h, 20ms);
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  INFO(s.message());
  CHECK(s.message().find("pull of 'w' round 1: 2 replies missing after 0.02 s") == 0);
  CHECK(s.message().find("; the operation was cancelled: nothing more is written into its buffer, and "
                         "the next pull of 'w' retries round 1") != std::string::npos);
  f.silent = false;
  f.seen.clear();
  h = tensors.issue(id, pb::CMD_PULL, nullptr, out.data());
  REQUIRE(h.ok());
  CHECK(f.table.wait(*h, 1s).ok());
  CHECK(wire::roundOf(f.seen.at(0)) == 1);
}

TEST_CASE("dense tensors: a cancelled push refuses the tensor's later pushes", "[dense_tensors]") {
  // The transport may still read a cancelled push's buffer, so the servers may sum part of it: a
  // repeat of the round would be taken for a duplicate, and later rounds would build on it.
  OneTensor t;
  auto& [f, config, tensors, id] = t;
  std::vector<float> in(8, 1.0f), out(8, 0.0f);
  f.silent = true;
  auto h = tensors.issue(id, pb::CMD_PUSH_PULL, in.data(), out.data());
  REQUIRE(h.ok());
  Status s = f.table.wait(*h, 20ms);
  CHECK(s.code() == StatusCode::kDeadlineExceeded);
  INFO(s.message());
  CHECK(s.message().find("; 'w' cannot be pushed again in this job (the servers may have summed part of "
                         "round 1") != std::string::npos);
  f.silent = false;
  for (auto command : {pb::CMD_PUSH, pb::CMD_PUSH_PULL}) {
    auto again = tensors.issue(id, command, in.data(), out.data());
    CHECK(again.status().code() == StatusCode::kFailedPrecondition);
    CHECK(again.status().message() ==
          "push-pull of 'w' round 1 was cancelled after its wait failed, and the servers may have summed "
          "part of it: 'w' cannot be pushed again in this job");
  }
}

TEST_CASE("dense tensors: a cancelled pull with later pulls issued is not retried", "[dense_tensors]") {
  OneTensor t;
  auto& [f, config, tensors, id] = t;
  std::vector<float> out(8, 0.0f);
  f.silent = true;
  auto first = tensors.issue(id, pb::CMD_PULL, nullptr, out.data());
  auto second = tensors.issue(id, pb::CMD_PULL, nullptr, out.data());
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  Status s = f.table.wait(*first, 10ms);
  CHECK(s.message().find("; the operation was cancelled: nothing more is "
                         "written into its buffer; round 1 is not "
                         "retried: later rounds were issued") != std::string::npos);
  s = f.table.wait(*second, 10ms);
  CHECK(s.message().find("the next pull of 'w' retries round 2") != std::string::npos);
  f.silent = false;
  f.seen.clear();
  auto third = tensors.issue(id, pb::CMD_PULL, nullptr, out.data());
  REQUIRE(third.ok());
  CHECK(f.table.wait(*third, 1s).ok());
  CHECK(wire::roundOf(f.seen.at(0)) == 2);
}

TEST_CASE("dense tensors: traffic, unmatched push-pull, and clear()", "[dense_tensors]") {
  OneTensor t;
  auto& [f, config, tensors, id] = t;
  CHECK(tensors.declare("odd", 7, DType::kFloat32, false, DeclareOptions()).status().code() ==
        StatusCode::kInvalidArgument);
  REQUIRE(tensors.account(id, pb::CMD_PUSH).ok());
  std::vector<float> in(8, 1.0f), out(8);
  auto h = tensors.issue(id, pb::CMD_PUSH, in.data(), nullptr);
  REQUIRE(h.ok());
  CHECK(f.table.wait(*h, 1s).ok());
  CHECK(tensors.traffic().tensor_bytes_pushed == 32);
  CHECK(tensors.traffic().network_bytes_pushed == 32);
  CHECK(tensors.issue(id, pb::CMD_PUSH_PULL, in.data(), out.data()).status().code() == StatusCode::kFailedPrecondition);
  tensors.clear();
  CHECK(tensors.count() == 0);
  CHECK(tensors.partitions(id).empty());
}

}  // namespace
}  // namespace zps
