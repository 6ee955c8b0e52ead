// The wire codec's CMD_FUSED messages (ps/wire/codec.h): a golden round trip of requests and of replies,
// and one test per refusal (entry count, nesting, mixed directions, commands that cannot be fused, each
// entry's length against the frame, the frame against the entries, a key twice).
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/codec_samples.h"

namespace zps::wire {
namespace {

using namespace codec_testing;

// An entry of a fused message: no protocol version of its own.
pb::Data entry(pb::DataCommand command, uint64_t key, uint64_t floats) {
  pb::Data d = sampleData(command, DType::kFloat32, floats, key);
  d.set_request_id(100 + key);
  d.clear_protocol_version();
  return d;
}

pb::Data fused(const std::vector<pb::Data>& entries) {
  pb::Data d;
  d.set_protocol_version(kProtocolVersion);
  d.mutable_fused();  // a body even without entries
  for (const auto& e : entries) *d.mutable_fused()->add_entries() = e;
  return d;
}

std::vector<Blob> frames(const pb::Data& d, size_t payload_bytes) {
  std::vector<Blob> f{dataFrame(d)};
  if (payload_bytes > 0) f.push_back(payloadOf(payload_bytes));
  return f;
}

std::string refusal(const std::vector<Blob>& f, const Limits& limits = Limits()) {
  auto decoded = decode(f, limits);
  if (decoded.ok()) return "decoded";
  CHECK(decoded.status().code() == StatusCode::kProtocol);
  return decoded.status().message();
}

TEST_CASE("codec: a fused request decodes into its entries with their payload slices", "[codec][fusion]") {
  // A push of 3 floats, a pull (no payload) and a push-pull of 2 floats: 20 payload bytes.
  auto h = fused({entry(pb::CMD_PUSH, 1, 3), entry(pb::CMD_PULL, 2, 4), entry(pb::CMD_PUSH_PULL, 3, 2)});
  const Blob payload = payloadOf(20);
  auto decoded = decode(encodeData(h, payload), Limits());
  REQUIRE(decoded.ok());
  const auto& m = std::get<DataMessage>(*decoded);
  CHECK(m.data.has_fused());
  CHECK(m.data.fused().entries_size() == 0);  // moved into m.entries
  CHECK(m.payload.empty());
  REQUIRE(m.entries.size() == 3);
  CHECK(m.entries[0].data.tensor().key() == 1);
  CHECK(m.entries[0].data.request_id() == 101);
  CHECK(m.entries[0].payload.data() == payload.data());
  CHECK(m.entries[0].payload.size() == 12);
  CHECK(commandOf(m.entries[1].data) == pb::CMD_PULL);
  CHECK(m.entries[1].payload.empty());
  CHECK(m.entries[2].payload.data() == payload.data() + 12);
  CHECK(m.entries[2].payload.size() == 8);
  CHECK(m.entries[2].dtype == DType::kFloat32);
}

TEST_CASE("codec: fused replies decode, acknowledgements and errors without payload", "[codec][fusion]") {
  pb::Data ack = entry(pb::CMD_REPLY, 1, 0);
  pb::Data sum = entry(pb::CMD_REPLY, 2, 4);
  pb::Data error = entry(pb::CMD_ERROR, 3, 0);
  auto decoded = decode(frames(fused({ack, sum, error}), 16), Limits());
  REQUIRE(decoded.ok());
  const auto& m = std::get<DataMessage>(*decoded);
  REQUIRE(m.entries.size() == 3);
  CHECK(m.entries[0].payload.empty());
  CHECK(m.entries[1].payload.size() == 16);
  CHECK(m.entries[2].data.error().text() == "key was never declared");
  // Replies may name a key twice (a pull's sum and the next round's push acknowledgement).
  CHECK(decode(frames(fused({ack, entry(pb::CMD_REPLY, 1, 4)}), 16), Limits()).ok());
  // All pulls: no payload frame at all.
  CHECK(decode(frames(fused({entry(pb::CMD_PULL, 1, 4), entry(pb::CMD_PULL, 2, 4)}), 0), Limits()).ok());
}

TEST_CASE("codec: fused entries count between 1 and the limit", "[codec][fusion]") {
  CHECK_THAT(refusal(frames(fused({}), 0)), Catch::Contains("0 entries, allowed 1 to 1024"));
  Limits small;
  small.max_fused_entries = 2;
  auto three = fused({entry(pb::CMD_PULL, 1, 1), entry(pb::CMD_PULL, 2, 1), entry(pb::CMD_PULL, 3, 1)});
  CHECK_THAT(refusal(frames(three, 0), small), Catch::Contains("3 entries, allowed 1 to 2"));
  CHECK(refusal(frames(three, 0)) == "decoded");
}

TEST_CASE("codec: fused entries do not nest and only data requests or replies fuse", "[codec][fusion]") {
  auto inner = fused({entry(pb::CMD_PULL, 1, 1)});
  CHECK_THAT(refusal(frames(fused({inner}), 0)), Catch::Contains("do not nest"));
  for (pb::DataCommand c :
       {pb::CMD_HELLO, pb::CMD_DECLARE, pb::CMD_PUSH_ROWS, pb::CMD_PULL_ROWS, pb::CMD_CHECKPOINT, pb::CMD_STATS}) {
    INFO(pb::DataCommand_Name(c));
    CHECK_THAT(refusal(frames(fused({entry(c, 1, 0)}), 0)), Catch::Contains("only PUSH, PULL and PUSH_PULL can"));
  }
  // Requests and replies do not mix, whichever comes first.
  CHECK_THAT(refusal(frames(fused({entry(pb::CMD_PULL, 1, 1), entry(pb::CMD_REPLY, 2, 0)}), 0)),
             Catch::Contains("CMD_REPLY cannot be fused with requests"));
  CHECK_THAT(refusal(frames(fused({entry(pb::CMD_REPLY, 1, 0), entry(pb::CMD_PULL, 2, 1)}), 0)),
             Catch::Contains("CMD_PULL cannot be fused with replies"));
  // Entries are checked like messages: an unknown dtype is named with the entry's position.
  pb::Data bad = entry(pb::CMD_PULL, 2, 1);
  bad.mutable_tensor()->set_dtype(999);
  CHECK_THAT(refusal(frames(fused({entry(pb::CMD_PULL, 1, 1), bad}), 0)),
             Catch::Contains("fused entry 1") && Catch::Contains("dtype 999 is unknown"));
}

TEST_CASE("codec: fused payload lengths are bounded by the frame, and fill it exactly", "[codec][fusion]") {
  auto two = fused({entry(pb::CMD_PUSH, 1, 3), entry(pb::CMD_PUSH, 2, 2)});  // 12 + 8 bytes
  CHECK(refusal(frames(two, 20)) == "decoded");
  CHECK_THAT(refusal(frames(two, 19)), Catch::Contains("needs 8 payload bytes but only 7 are left"));
  CHECK_THAT(refusal(frames(two, 0)), Catch::Contains("needs 12 payload bytes but only 0 are left"));
  CHECK_THAT(refusal(frames(two, 21)), Catch::Contains("frame is 21 bytes but its entries take 20"));
  // A count whose byte size overflows is refused before any slice is taken.
  auto huge = fused({entry(pb::CMD_PUSH, 1, UINT64_MAX / 2)});
  CHECK_THAT(refusal(frames(huge, 8)), Catch::Contains("exceeds the payload limit"));
  CHECK_THAT(refusal({dataFrame(fused({entry(pb::CMD_PULL, 1, 1)})), payloadOf(0), payloadOf(0)}),
             Catch::Contains("at most"));
  // A compressed entry takes its encoding's size: 3 floats as fp16 are 6 bytes.
  pb::Data fp16 = entry(pb::CMD_PUSH, 1, 3);
  fp16.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
  CHECK(refusal(frames(fused({fp16}), 6)) == "decoded");
  CHECK_THAT(refusal(frames(fused({fp16}), 12)), Catch::Contains("frame is 12 bytes but its entries take 6"));
}

TEST_CASE("codec: a fused request names each key once", "[codec][fusion]") {
  auto twice = fused({entry(pb::CMD_PUSH, 7, 1), entry(pb::CMD_PULL, 8, 1), entry(pb::CMD_PULL, 7, 1)});
  CHECK_THAT(refusal(frames(twice, 4)), Catch::Contains("key 7 appears twice in one fused message"));
  // The refused message keeps its entries, so a server can answer each of them.
  pb::Data rejected;
  REQUIRE_FALSE(decode(frames(twice, 4), Limits(), &rejected).ok());
  CHECK(rejected.fused().entries_size() == 3);
  CHECK(rejected.fused().entries(2).request_id() == 107);
}

}  // namespace
}  // namespace zps::wire
