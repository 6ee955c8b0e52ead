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
        pb::DataHeader h = sampleHeader(cmd, dtype, n);
        Blob payload = with_payload ? payloadOf(n * dtypeSize(dtype)) : Blob();
        std::vector<Blob> frames = encodeData(h, payload);
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
        CHECK(msg.header.SerializeAsString() == h.SerializeAsString());
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

// The bodies sampleHeader does not make: each reads back into the header it came from.
TEST_CASE("codec: hello and stats replies, rows, tables and error flags round trip", "[codec]") {
  std::vector<std::pair<pb::DataHeader, std::vector<Blob>>> samples;
  pb::DataHeader hello_reply;
  hello_reply.set_command(pb::CMD_REPLY);
  hello_reply.set_request_id(3);
  hello_reply.set_auth_mac("mac");
  hello_reply.set_ipc_name("zps-00ff");
  hello_reply.set_upgrade_token(77);
  hello_reply.set_lane_token(78);
  hello_reply.set_accepts_fused(true);
  samples.emplace_back(hello_reply, encodeData(hello_reply));
  pb::DataHeader stats = hello_reply;
  stats.Clear();
  stats.set_command(pb::CMD_REPLY);
  stats.set_request_id(4);
  stats.set_stats_cpu_ns(1);
  stats.set_stats_peak_rss_bytes(2);
  stats.set_stats_pushed_bytes(3);
  stats.set_stats_summed_bytes(4);
  stats.set_stats_sum_ns(5);
  samples.emplace_back(stats, encodeData(stats));
  pb::DataHeader table = sampleHeader(pb::CMD_DECLARE, DType::kFloat32, 0);
  table.set_mode(pb::MODE_PARAM);
  table.set_row_dim(8);
  table.set_async(true);
  table.set_restore_step(40);
  table.set_local_size(2);
  table.mutable_optimizer()->set_kind(2);
  table.mutable_optimizer()->set_lr(0.5f);
  samples.emplace_back(table, encodeData(table));
  pb::DataHeader push_rows;
  push_rows.set_command(pb::CMD_PUSH_ROWS);
  push_rows.set_request_id(5);
  push_rows.set_key(9);
  push_rows.set_round(2);
  push_rows.set_num_elements(3);
  push_rows.set_row_dim(2);
  push_rows.set_push_seq(6);
  samples.emplace_back(push_rows, encodeRows(push_rows, payloadOf(24), payloadOf(24)));
  pb::DataHeader pull_rows = push_rows;
  pull_rows.set_command(pb::CMD_PULL_ROWS);
  pull_rows.clear_push_seq();
  samples.emplace_back(pull_rows, encodeRows(pull_rows, payloadOf(24)));
  pb::DataHeader error = sampleHeader(pb::CMD_ERROR, DType::kFloat32, 0);
  error.set_recovering(true);
  error.set_user_error(true);
  error.set_generation(3);
  samples.emplace_back(error, encodeData(error));
  pb::DataHeader ack = sampleHeader(pb::CMD_REPLY, DType::kFloat32, 0);
  ack.add_awaited()->set_key(4);
  ack.mutable_awaited(0)->set_round(2);
  samples.emplace_back(ack, encodeData(ack));
  pb::DataHeader push = sampleHeader(pb::CMD_PUSH, DType::kFloat32, 4);
  push.set_received_through(1);
  push.set_push_seq(2);
  push.set_wants_awaited(true);
  push.set_holds_credit(true);
  push.set_encoding(pb::ENCODING_FP16);
  samples.emplace_back(push, encodeData(push, payloadOf(8)));
  for (const auto& [header, frames] : samples) {
    INFO(header.ShortDebugString());
    auto decoded = decode(frames, Limits());
    REQUIRE(decoded.ok());
    CHECK(std::get<DataMessage>(*decoded).header.SerializeAsString() == header.SerializeAsString());
  }
}

TEST_CASE("codec: zero-element push with an empty payload frame is valid", "[codec]") {
  pb::DataHeader h = sampleHeader(pb::CMD_PUSH, DType::kFloat32, 0);
  auto frames = encodeData(h, Blob::copyOf(nullptr, 0));
  REQUIRE(frames.size() == 2);
  auto decoded = decode(frames, Limits());
  REQUIRE(decoded.ok());
  CHECK(std::get<DataMessage>(*decoded).payload.size() == 0);
}

TEST_CASE("codec: payload exactly at max_payload_bytes is accepted, one element more is not", "[codec]") {
  Limits limits;
  limits.max_payload_bytes = 64;
  auto ok = decode(encodeData(sampleHeader(pb::CMD_PUSH, DType::kFloat32, 16), payloadOf(64)), limits);
  CHECK(ok.ok());
  auto over = decode(encodeData(sampleHeader(pb::CMD_PUSH, DType::kFloat32, 17), payloadOf(68)), limits);
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
