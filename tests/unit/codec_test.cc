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
        CHECK(msg.dtype == dtype);
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
