// Tests for the wire codec (ps/wire/codec.cc): golden round trips of every control body and every
// data command, payload limits and byte counts. Malformed inputs are in codec_malformed_test.cc,
// random bytes in codec_fuzz_test.cc.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/codec_samples.h"

namespace zps::wire {
namespace {

using namespace codec_testing;

TEST_CASE("codec: every control body survives a round trip", "[codec]") {
  Limits limits;
  for (const auto& [name, control] : allControlBodies()) {
    INFO(name);
    std::vector<Blob> frames = encodeControl(control);
    REQUIRE(frames.size() == 1);
    auto decoded = decode(frames, limits);
    REQUIRE(decoded.ok());
    REQUIRE(std::holds_alternative<pb::Control>(*decoded));
    const auto& got = std::get<pb::Control>(*decoded);
    CHECK(got.body_case() == control.body_case());
    CHECK(got.SerializeAsString() == control.SerializeAsString());
  }
}

TEST_CASE("codec: control round trip keeps register fields", "[codec]") {
  auto decoded = decode(encodeControl(sampleRegister()), Limits());
  REQUIRE(decoded.ok());
  const auto& r = std::get<pb::Control>(*decoded).register_();
  CHECK(r.magic() == kMagic);
  CHECK(r.protocol_version() == kProtocolVersion);
  CHECK(r.role() == pb::WORKER);
  CHECK(r.host() == "10.0.0.7");
  CHECK(r.requested_rank() == 3);
  CHECK(r.rank_source() == "DMLC_WORKER_ID");
  CHECK(r.hostname() == "job-worker-3");
  CHECK(r.pid() == 4242);
  CHECK(r.expected_servers() == 2);
  CHECK(r.expected_workers() == 4);
}

TEST_CASE("codec: every data command round trips, with and without payload", "[codec]") {
  Limits limits;
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                          DType::kInt32,   DType::kInt64,   DType::kUInt8};
  for (pb::DataCommand cmd : kAllCommands) {
    for (DType dtype : dtypes) {
      for (bool with_payload : {false, true}) {
        const uint64_t n = 37;
        INFO(pb::DataCommand_Name(cmd) << " " << dtypeName(dtype) << " payload=" << with_payload);
        const pb::Data sent = sampleData(cmd, dtype, n);
        Blob payload = with_payload ? payloadOf(n * dtypeSize(dtype)) : Blob();
        std::vector<Blob> frames = encodeData(sent, payload);
        REQUIRE(frames.size() == (with_payload ? 2u : 1u));
        auto decoded = decode(frames, limits);
        bool valid = with_payload ? mayHavePayload(cmd) : !hasPayload(cmd);
        if (!valid) {
          REQUIRE_FALSE(decoded.ok());
          CHECK(decoded.status().code() == StatusCode::kProtocol);
          CHECK_THAT(decoded.status().message(),
                     Catch::Contains(pb::DataCommand_Name(cmd)) && Catch::Contains("payload"));
          continue;
        }
        REQUIRE(decoded.ok());
        REQUIRE(std::holds_alternative<DataMessage>(*decoded));
        const auto& msg = std::get<DataMessage>(*decoded);
        CHECK(msg.data.SerializeAsString() == sent.SerializeAsString());
        CHECK(msg.dtype == (carriesDtype(cmd) ? dtype : DType::kFloat32));
        if (with_payload) {
          REQUIRE(msg.payload.size() == n * dtypeSize(dtype));
          // Zero-copy: the decoded payload is the received frame itself.
          CHECK(msg.payload.data() == payload.data());
          CHECK(std::memcmp(msg.payload.data(), payload.data(), payload.size()) == 0);
        } else {
          CHECK(msg.payload.empty());
        }
      }
    }
  }
}

// A data message of protocol version 2 with request id `request_id` (the version the encoders send).
pb::Data dataOf(uint64_t request_id) {
  pb::Data d;
  d.set_protocol_version(kProtocolVersion);
  d.set_request_id(request_id);
  return d;
}

// The bodies sampleData does not make: each decodes into the message it came from.
TEST_CASE("codec: hello and stats replies, rows, tables and error flags round trip", "[codec]") {
  std::vector<std::pair<pb::Data, std::vector<Blob>>> samples;
  pb::Data hello_reply = dataOf(3);
  hello_reply.mutable_hello_reply()->set_auth_mac("mac");
  hello_reply.mutable_hello_reply()->set_ipc_name("zps-00ff");
  hello_reply.mutable_hello_reply()->set_upgrade_token(77);
  hello_reply.mutable_hello_reply()->set_lane_token(78);
  hello_reply.mutable_hello_reply()->set_accepts_fused(true);
  samples.emplace_back(hello_reply, encodeData(hello_reply));
  pb::Data stats = dataOf(4);
  pb::StatsReply* totals = stats.mutable_stats_reply();
  totals->set_cpu_ns(1);
  totals->set_peak_rss_bytes(2);
  totals->set_pushed_bytes(3);
  totals->set_summed_bytes(4);
  totals->set_sum_ns(5);
  samples.emplace_back(stats, encodeData(stats));
  pb::Data table = sampleData(pb::CMD_DECLARE, DType::kFloat32, 0);
  pb::Declare* declare = table.mutable_declare();
  declare->set_mode(pb::MODE_PARAM);
  declare->set_row_dim(8);
  declare->set_async(true);
  declare->set_restore_step(40);
  declare->set_local_size(2);
  declare->mutable_optimizer()->set_kind(2);
  declare->mutable_optimizer()->set_lr(0.5f);
  samples.emplace_back(table, encodeData(table));
  pb::Data push_rows = dataOf(5);
  pb::Rows* rows = push_rows.mutable_rows();
  rows->set_push(true);
  rows->set_key(9);
  rows->set_round(2);
  rows->set_count(3);
  rows->set_row_dim(2);
  rows->set_push_seq(6);
  samples.emplace_back(push_rows, encodeRows(push_rows, payloadOf(24), payloadOf(24)));
  pb::Data pull_rows = push_rows;
  pull_rows.mutable_rows()->set_push(false);
  pull_rows.mutable_rows()->clear_push_seq();
  samples.emplace_back(pull_rows, encodeRows(pull_rows, payloadOf(24)));
  pb::Data error = sampleData(pb::CMD_ERROR, DType::kFloat32, 0);
  error.mutable_error()->set_recovering(true);
  error.mutable_error()->set_user_error(true);
  error.set_generation(3);
  samples.emplace_back(error, encodeData(error));
  pb::Data ack = sampleData(pb::CMD_REPLY, DType::kFloat32, 0);
  ack.mutable_reply()->add_awaited()->set_key(4);
  ack.mutable_reply()->mutable_awaited(0)->set_round(2);
  samples.emplace_back(ack, encodeData(ack));
  pb::Data push = sampleData(pb::CMD_PUSH, DType::kFloat32, 4);
  pb::Tensor* tensor = push.mutable_tensor();
  tensor->set_received_through(1);
  tensor->set_push_seq(2);
  tensor->set_wants_awaited(true);
  tensor->set_holds_credit(true);
  tensor->set_encoding(pb::ENCODING_FP16);
  samples.emplace_back(push, encodeData(push, payloadOf(8)));
  for (const auto& [data, frames] : samples) {
    INFO(data.ShortDebugString());
    auto decoded = decode(frames, Limits());
    REQUIRE(decoded.ok());
    CHECK(std::get<DataMessage>(*decoded).data.SerializeAsString() == data.SerializeAsString());
  }
}

TEST_CASE("codec: zero-element push with an empty payload frame is valid", "[codec]") {
  auto frames = encodeData(sampleData(pb::CMD_PUSH, DType::kFloat32, 0), Blob::copyOf(nullptr, 0));
  REQUIRE(frames.size() == 2);
  auto decoded = decode(frames, Limits());
  REQUIRE(decoded.ok());
  CHECK(std::get<DataMessage>(*decoded).payload.size() == 0);
}

TEST_CASE("codec: payload exactly at max_payload_bytes is accepted, one element more is not", "[codec]") {
  Limits limits;
  limits.max_payload_bytes = 64;
  auto ok = decode(encodeData(sampleData(pb::CMD_PUSH, DType::kFloat32, 16), payloadOf(64)), limits);
  CHECK(ok.ok());
  auto over = decode(encodeData(sampleData(pb::CMD_PUSH, DType::kFloat32, 17), payloadOf(68)), limits);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == StatusCode::kProtocol);
  CHECK_THAT(over.status().message(), Catch::Contains("payload limit"));
}

TEST_CASE("codec: checkedBytes detects overflow", "[codec]") {
  uint64_t bytes = 1;
  CHECK(checkedBytes(0, 8, &bytes));
  CHECK(bytes == 0);
  CHECK(checkedBytes(10, 4, &bytes));
  CHECK(bytes == 40);
  CHECK(checkedBytes(UINT64_MAX, 1, &bytes));
  CHECK(bytes == UINT64_MAX);
  CHECK(checkedBytes(UINT64_MAX / 8, 8, &bytes));
  CHECK(bytes == UINT64_MAX / 8 * 8);
  CHECK_FALSE(checkedBytes(UINT64_MAX / 8 + 1, 8, &bytes));
  CHECK_FALSE(checkedBytes(UINT64_MAX, 2, &bytes));
  CHECK_FALSE(checkedBytes(uint64_t{1} << 62, 4, &bytes));
}

TEST_CASE("codec: roleName", "[codec]") {
  CHECK(std::string(roleName(pb::SCHEDULER)) == "scheduler");
  CHECK(std::string(roleName(pb::SERVER)) == "server");
  CHECK(std::string(roleName(pb::WORKER)) == "worker");
  CHECK(std::string(roleName(pb::ROLE_UNSPECIFIED)) == "unknown-role");
  CHECK(std::string(roleName(static_cast<pb::Role>(42))) == "unknown-role");
}

}  // namespace
}  // namespace zps::wire
