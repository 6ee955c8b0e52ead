// Tests for the wire codec's refusals (ps/wire/codec.cc): a table of malformed inputs that must each
// come back as a kProtocol status naming the fault, the same limits accepted just below them, and
// every truncation of a valid header.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <catch2/catch.hpp>

#include "tests/unit/codec_samples.h"

namespace zps::wire {
namespace {

using namespace codec_testing;

struct BadCase {
  std::string name;
  std::function<std::vector<Blob>()> frames;
  std::string expect_in_message;  // empty: any message
  Limits limits = Limits();
};

pb::DataHeader withCommand(pb::DataHeader h, int command) {
  h.set_command(static_cast<pb::DataCommand>(command));
  return h;
}

std::vector<BadCase> malformedInputs() {
  std::vector<BadCase> cases;
  const pb::DataHeader push = sampleHeader(pb::CMD_PUSH, DType::kFloat32, 4);
  const pb::DataHeader pull = sampleHeader(pb::CMD_PULL, DType::kFloat32, 4);

  cases.push_back({"zero frames", [] { return std::vector<Blob>{}; }, "no frames"});
  cases.push_back({"three frames",
                   [=] {
                     auto f = encodeData(push, payloadOf(16));
                     f.push_back(payloadOf(16));
                     return f;
                   },
                   "3 frames"});
  cases.push_back({"ten frames", [] { return std::vector<Blob>(10, bytesOf("x")); }, "10 frames"});
  cases.push_back({"random bytes header",
                   [] { return std::vector<Blob>{bytesOf(std::string("\xff\xff\xff\xff\x0f\xde\xad", 7))}; },
                   "not a valid envelope"});
  cases.push_back({"length prefix longer than the frame",
                   [] { return std::vector<Blob>{bytesOf(std::string("\x0a\x7f\x08\x01", 4))}; },
                   "not a valid envelope"});
  cases.push_back({"empty header frame", [] { return std::vector<Blob>{bytesOf("")}; }, "no (known) body"});
  cases.push_back({"unknown envelope field only", [] { return std::vector<Blob>{bytesOf(std::string("\x18\x05", 2))}; },
                   "no (known) body"});
  {
    BadCase c{"oversized header", [] { return encodeControl(sampleRegisterReply(20)); }, "over the limit of 64"};
    c.limits.max_envelope_bytes = 64;
    cases.push_back(c);
  }
  cases.push_back({"oversized header at the default limit",
                   [] {
                     pb::Control c;
                     c.mutable_finished()->set_message(std::string((1 << 20) + 10, 'm'));
                     return encodeControl(c);
                   },
                   "over the limit of 1048576"});
  cases.push_back({"unknown data command 99", [=] { return std::vector<Blob>{dataFrame(withCommand(pull, 99))}; },
                   "data command 99 is unknown"});
  cases.push_back({"unspecified data command", [=] { return std::vector<Blob>{dataFrame(withCommand(pull, 0))}; },
                   "data command 0 is unknown"});
  cases.push_back(
      {"negative data command", [=] { return std::vector<Blob>{dataFrame(withCommand(pull, -1))}; }, "is unknown"});
  cases.push_back({"unknown dtype 7",
                   [=] {
                     auto h = pull;
                     h.set_dtype(7);
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "dtype 7 is unknown"});
  cases.push_back({"unknown dtype UINT32_MAX",
                   [=] {
                     auto h = pull;
                     h.set_dtype(UINT32_MAX);
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "is unknown"});
  cases.push_back({"unknown key mode 5",
                   [=] {
                     auto h = pull;
                     h.set_mode(static_cast<pb::KeyMode>(5));
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "key mode 5 is unknown"});
  cases.push_back({"unknown key mode -3",
                   [=] {
                     auto h = pull;
                     h.set_mode(static_cast<pb::KeyMode>(-3));
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "key mode -3 is unknown"});
  cases.push_back({"push without payload", [=] { return std::vector<Blob>{dataFrame(push)}; },
                   "CMD_PUSH is missing its payload frame"});
  cases.push_back({"push_pull without payload",
                   [=] { return std::vector<Blob>{dataFrame(withCommand(push, pb::CMD_PUSH_PULL))}; },
                   "CMD_PUSH_PULL is missing its payload frame"});
  cases.push_back(
      {"pull with payload", [=] { return encodeData(pull, payloadOf(16)); }, "CMD_PULL must not carry a payload"});
  cases.push_back({"declare with payload",
                   [=] { return encodeData(withCommand(pull, pb::CMD_DECLARE), payloadOf(16)); },
                   "CMD_DECLARE must not carry a payload"});
  cases.push_back({"error with payload", [=] { return encodeData(withCommand(pull, pb::CMD_ERROR), payloadOf(16)); },
                   "CMD_ERROR must not carry a payload"});
  cases.push_back({"control with a payload frame",
                   [] {
                     auto f = encodeControl(sampleRegister());
                     f.push_back(payloadOf(4));
                     return f;
                   },
                   "must not carry payload"});
  cases.push_back({"payload one byte short", [=] { return encodeData(push, payloadOf(15)); },
                   "payload is 15 bytes but 4 x float32 needs 16"});
  cases.push_back({"payload one byte long", [=] { return encodeData(push, payloadOf(17)); },
                   "payload is 17 bytes but 4 x float32 needs 16"});
  cases.push_back({"empty payload for 4 elements", [=] { return encodeData(push, Blob::copyOf(nullptr, 0)); },
                   "payload is 0 bytes"});
  cases.push_back({"reply payload of the wrong size",
                   [=] { return encodeData(withCommand(push, pb::CMD_REPLY), payloadOf(8)); }, "needs 16"});
  cases.push_back({"num_elements UINT64_MAX float32",
                   [=] {
                     auto h = push;
                     h.set_num_elements(UINT64_MAX);
                     return encodeData(h, payloadOf(16));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements UINT64_MAX uint8",
                   [=] {
                     auto h = push;
                     h.set_dtype(static_cast<uint32_t>(DType::kUInt8));
                     h.set_num_elements(UINT64_MAX);
                     return encodeData(h, payloadOf(16));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements wrapping to a small size",
                   [=] {
                     // 2^62 * 4 wraps to 0 in 64 bits; an unchecked multiply would accept an
                     // empty payload.
                     auto h = push;
                     h.set_num_elements(uint64_t{1} << 62);
                     return encodeData(h, Blob::copyOf(nullptr, 0));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements too large for a pull",
                   [=] {
                     auto h = pull;
                     h.set_num_elements(UINT64_MAX);
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "exceeds the payload limit"});
  for (int group : {0, 4, 7, -1}) {
    cases.push_back({"barrier group " + std::to_string(group),
                     [group] {
                       pb::Control c;
                       c.mutable_barrier()->set_group(static_cast<pb::BarrierGroup>(group));
                       c.mutable_barrier()->set_sequence(1);
                       return encodeControl(c);
                     },
                     "barrier group " + std::to_string(group) + " is out of range"});
    cases.push_back({"barrier release group " + std::to_string(group),
                     [group] {
                       pb::Control c;
                       c.mutable_barrier_release()->set_group(static_cast<pb::BarrierGroup>(group));
                       return encodeControl(c);
                     },
                     "barrier group " + std::to_string(group) + " is out of range"});
  }
  for (int role : {0, 4, 99, -2}) {
    cases.push_back({"register role " + std::to_string(role),
                     [role] {
                       auto c = sampleRegister();
                       c.mutable_register_()->set_role(static_cast<pb::Role>(role));
                       return encodeControl(c);
                     },
                     "register.role has invalid role value " + std::to_string(role)});
    cases.push_back({"address book role " + std::to_string(role),
                     [role] {
                       auto c = sampleRegisterReply(3);
                       c.mutable_register_reply()->mutable_nodes(2)->set_role(static_cast<pb::Role>(role));
                       return encodeControl(c);
                     },
                     "address book role has invalid role value " + std::to_string(role)});
  }
  cases.push_back({"register as scheduler",
                   [] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_role(pb::SCHEDULER);
                     return encodeControl(c);
                   },
                   "cannot register as the scheduler"});
  cases.push_back({"register port over 65535",
                   [] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_port(65536);
                     return encodeControl(c);
                   },
                   "register.port 65536"});
  cases.push_back({"register negative requested rank",
                   [] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_requested_rank(-2);
                     return encodeControl(c);
                   },
                   "requested_rank is negative"});
  cases.push_back({"address book negative rank",
                   [] {
                     auto c = sampleRegisterReply(3);
                     c.mutable_register_reply()->mutable_nodes(1)->set_rank(-1);
                     return encodeControl(c);
                   },
                   "negative rank"});
  cases.push_back({"address book port over 65535",
                   [] {
                     auto c = sampleRegisterReply(3);
                     c.mutable_register_reply()->mutable_nodes(0)->set_port(70000);
                     return encodeControl(c);
                   },
                   "port > 65535"});
  const std::string big(4097, 'h');
  cases.push_back({"register.host too long",
                   [big] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_host(big);
                     return encodeControl(c);
                   },
                   "register.host is 4097 bytes, over the limit of 4096"});
  cases.push_back({"register.hostname too long",
                   [big] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_hostname(big);
                     return encodeControl(c);
                   },
                   "register.hostname is 4097 bytes"});
  cases.push_back({"register.rank_source too long",
                   [big] {
                     auto c = sampleRegister();
                     c.mutable_register_()->set_rank_source(big);
                     return encodeControl(c);
                   },
                   "register.rank_source is 4097 bytes"});
  cases.push_back({"register_reply.error too long",
                   [big] {
                     pb::Control c;
                     c.mutable_register_reply()->set_error(big);
                     return encodeControl(c);
                   },
                   "register_reply.error is 4097 bytes"});
  cases.push_back({"address book host too long",
                   [big] {
                     auto c = sampleRegisterReply(3);
                     c.mutable_register_reply()->mutable_nodes(2)->set_host(big);
                     return encodeControl(c);
                   },
                   "address book host is 4097 bytes"});
  cases.push_back({"address book hostname too long",
                   [big] {
                     auto c = sampleRegisterReply(3);
                     c.mutable_register_reply()->mutable_nodes(2)->set_hostname(big);
                     return encodeControl(c);
                   },
                   "address book hostname is 4097 bytes"});
  cases.push_back({"finished.message too long",
                   [big] {
                     pb::Control c;
                     c.mutable_finished()->set_message(big);
                     return encodeControl(c);
                   },
                   "finished.message is 4097 bytes"});
  cases.push_back({"shutdown.reason too long",
                   [big] {
                     pb::Control c;
                     c.mutable_shutdown()->set_reason(big);
                     return encodeControl(c);
                   },
                   "shutdown.reason is 4097 bytes"});
  cases.push_back({"recovery.lost too long",
                   [big] {
                     pb::Control c;
                     c.mutable_recovery()->set_lost(big);
                     return encodeControl(c);
                   },
                   "recovery.lost is 4097 bytes"});
  cases.push_back({"data.name too long",
                   [=] {
                     auto h = withCommand(pull, pb::CMD_DECLARE);
                     h.set_name(big);
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "data.name is 4097 bytes"});
  cases.push_back({"data.error too long",
                   [=] {
                     auto h = withCommand(pull, pb::CMD_ERROR);
                     h.set_error(big);
                     return std::vector<Blob>{dataFrame(h)};
                   },
                   "data.error is 4097 bytes"});
  {
    BadCase c{"string over a small max_string_bytes", [] { return encodeControl(sampleRegister()); },
              "register.host is 8 bytes, over the limit of 4"};
    c.limits.max_string_bytes = 4;
    cases.push_back(c);
  }
  {
    BadCase c{"address book over the limit", [] { return encodeControl(sampleRegisterReply(5)); },
              "address book has 5 nodes, over the limit"};
    c.limits.max_address_book = 4;
    cases.push_back(c);
  }
  for (int code : {-1, 256, INT32_MIN, INT32_MAX}) {
    cases.push_back({"shutdown exit code " + std::to_string(code),
                     [code] {
                       pb::Control c;
                       c.mutable_shutdown()->set_exit_code(code);
                       return encodeControl(c);
                     },
                     "shutdown.exit_code out of range"});
  }
  cases.push_back(
      {"control with no body", [] { return encodeControl(pb::Control()); }, "control message has no (known) body"});
  cases.push_back({"awaited rounds on a push",
                   [=] {
                     pb::DataHeader h = push;
                     h.add_awaited()->set_key(1);
                     return encodeData(h, payloadOf(16));
                   },
                   "CMD_PUSH must not name awaited rounds"});
  cases.push_back({"awaited rounds beyond the limit",
                   [] {
                     pb::DataHeader h = sampleHeader(pb::CMD_REPLY, DType::kFloat32, 0);
                     for (int i = 0; i <= kMaxAwaitedRounds; ++i) h.add_awaited()->set_key(i);
                     return encodeData(h);
                   },
                   "names 17 awaited rounds, at most 16"});
  for (pb::DataCommand command : {pb::CMD_PULL, pb::CMD_PUSH_PULL}) {
    cases.push_back({pb::DataCommand_Name(command) + " that claims push credit",
                     [=] {
                       pb::DataHeader h = sampleHeader(command, DType::kFloat32, 4);
                       h.set_holds_credit(true);
                       return encodeData(h, command == pb::CMD_PULL ? Blob() : payloadOf(16));
                     },
                     pb::DataCommand_Name(command) + " must not hold push credit; only a PUSH does"});
  }
  // Command 12 was the reply windows' acknowledgement (removed; its number is reserved): a peer that
  // still sends one is refused like any unknown command.
  cases.push_back({"the removed reply-window acknowledgement",
                   [] {
                     pb::DataHeader h = withCommand(sampleHeader(pb::CMD_PULL, DType::kFloat32, 0), 12);
                     h.GetReflection()->MutableUnknownFields(&h)->AddVarint(69, 7);
                     return encodeData(h);
                   },
                   "data command 12 is unknown"});
  return cases;
}

TEST_CASE("codec: malformed inputs are kProtocol errors", "[codec]") {
  for (const auto& c : malformedInputs()) {
    INFO(c.name);
    std::vector<Blob> frames = c.frames();
    auto decoded = decode(frames, c.limits);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.status().code() == StatusCode::kProtocol);
    if (!c.expect_in_message.empty()) CHECK_THAT(decoded.status().message(), Catch::Contains(c.expect_in_message));
  }
}

TEST_CASE("codec: the limits tested above are accepted just below the limit", "[codec]") {
  // Guards the table above: each bad case must be bad because of the value under test.
  Limits small;
  small.max_address_book = 4;
  CHECK(decode(encodeControl(sampleRegisterReply(4)), small).ok());
  small.max_string_bytes = 14;  // the longest string in sampleRegister()
  CHECK(decode(encodeControl(sampleRegister()), small).ok());
  auto c = sampleRegister();
  c.mutable_register_()->set_host(std::string(4096, 'h'));
  c.mutable_register_()->set_port(65535);
  c.mutable_register_()->set_requested_rank(-1);
  CHECK(decode(encodeControl(c), Limits()).ok());
  c.mutable_register_()->set_role(pb::SERVER);
  CHECK(decode(encodeControl(c), Limits()).ok());
  Limits tight;
  auto frames = encodeControl(sampleRegisterReply(20));
  tight.max_envelope_bytes = frames[0].size();
  CHECK(decode(frames, tight).ok());
  tight.max_envelope_bytes = frames[0].size() - 1;
  CHECK_FALSE(decode(frames, tight).ok());
  pb::DataHeader reply = sampleHeader(pb::CMD_REPLY, DType::kFloat32, 0);
  for (int i = 0; i < kMaxAwaitedRounds; ++i) reply.add_awaited()->set_key(i);
  CHECK(decode(encodeData(reply), Limits()).ok());
  pb::DataHeader paced = sampleHeader(pb::CMD_PUSH, DType::kFloat32, 4);
  paced.set_holds_credit(true);
  CHECK(decode(encodeData(paced, payloadOf(16)), Limits()).ok());
}

// Fields 65-69 were the reply windows' (removed; their numbers are reserved). A peer that still sets
// them sends a message that decodes as if it had not: protobuf keeps them as unknown fields, which
// nothing reads, and every known field, payload and fused entry is the same.
TEST_CASE("codec: a peer's removed reply-window fields are ignored", "[codec]") {
  auto withOldFields = [](pb::DataHeader h) {
    std::vector<pb::DataHeader*> headers{&h};
    for (pb::DataHeader& entry : *h.mutable_entries()) headers.push_back(&entry);
    for (pb::DataHeader* header : headers) {
      google::protobuf::UnknownFieldSet* old = header->GetReflection()->MutableUnknownFields(header);
      old->AddVarint(65, 1);                                   // a bool: set
      old->AddVarint(66, static_cast<uint64_t>(int64_t{-3}));  // an int64 priority
      old->AddVarint(67, uint64_t{1} << 40);                   // a window of bytes, beyond its old limit
      old->AddVarint(68, 1);                                   // a bool: set
      for (uint64_t id : {5, 6}) old->AddVarint(69, id);       // repeated request ids
    }
    return h;
  };
  struct Sample {
    pb::DataHeader header;
    Blob payload;
  };
  pb::DataHeader fused;
  fused.set_command(pb::CMD_FUSED);
  for (pb::DataCommand command : {pb::CMD_PULL, pb::CMD_PUSH}) {  // a pull, and a push of 2 floats
    pb::DataHeader entry = sampleHeader(command, DType::kFloat32, command == pb::CMD_PULL ? 4 : 2);
    entry.set_key(fused.entries_size() + 1);  // a fused message names each key once
    *fused.add_entries() = entry;
  }
  const std::vector<Sample> samples = {
      {sampleHeader(pb::CMD_PULL, DType::kFloat32, 4), Blob()},
      {sampleHeader(pb::CMD_PUSH, DType::kFloat32, 4), payloadOf(16)},
      {sampleHeader(pb::CMD_REPLY, DType::kFloat64, 2), payloadOf(16)},
      {fused, payloadOf(8)},
  };
  for (const Sample& plain : samples) {
    INFO(pb::DataCommand_Name(plain.header.command()));
    auto expected = decode(encodeData(plain.header, plain.payload), Limits());
    REQUIRE(expected.ok());
    const std::vector<Blob> frames = encodeData(withOldFields(plain.header), plain.payload);
    REQUIRE(frames[0].size() > encodeData(plain.header)[0].size());  // the old fields are on the wire
    auto decoded = decode(frames, Limits());
    REQUIRE(decoded.ok());
    const auto& got = std::get<DataMessage>(*decoded);
    const auto& want = std::get<DataMessage>(*expected);
    pb::DataHeader known = got.header;
    known.DiscardUnknownFields();
    CHECK(known.SerializeAsString() == want.header.SerializeAsString());
    CHECK(got.payload.view() == want.payload.view());
    REQUIRE(got.entries.size() == want.entries.size());
    for (size_t i = 0; i < got.entries.size(); ++i) {
      pb::DataHeader entry = got.entries[i].header;
      entry.DiscardUnknownFields();
      CHECK(entry.SerializeAsString() == want.entries[i].header.SerializeAsString());
      CHECK(got.entries[i].payload.view() == want.entries[i].payload.view());
    }
  }
}

TEST_CASE("codec: every truncation of a valid header is rejected", "[codec]") {
  std::vector<std::vector<Blob>> messages = {
      encodeControl(sampleRegister()),
      encodeControl(sampleRegisterReply(3)),
      encodeData(sampleHeader(pb::CMD_DECLARE, DType::kFloat16, 9)),
      encodeData(sampleHeader(pb::CMD_PUSH, DType::kFloat32, 4), payloadOf(16)),
  };
  for (const auto& frames : messages) {
    const std::string full(frames[0].view());
    REQUIRE(decode(frames, Limits()).ok());
    for (size_t len = 0; len < full.size(); ++len) {
      INFO("truncated to " << len << " of " << full.size() << " bytes");
      std::vector<Blob> cut = frames;
      cut[0] = Blob::fromString(full.substr(0, len));
      auto decoded = decode(cut, Limits());
      REQUIRE_FALSE(decoded.ok());
      CHECK(decoded.status().code() == StatusCode::kProtocol);
    }
  }
}

}  // namespace
}  // namespace zps::wire
