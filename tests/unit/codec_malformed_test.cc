// Tests for the wire codec's refusals (ps/wire/codec.cc): a table of malformed inputs that must each
// come back as a kProtocol status naming the fault, the same limits accepted just below them, and
// every truncation of a valid header.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

pb::Data withOp(pb::Data d, int op) {
  d.mutable_tensor()->set_op(static_cast<pb::TensorOp>(op));
  return d;
}

std::vector<BadCase> malformedInputs() {
  std::vector<BadCase> cases;
  const pb::Data push = sampleData(pb::CMD_PUSH, DType::kFloat32, 4);
  const pb::Data pull = sampleData(pb::CMD_PULL, DType::kFloat32, 4);
  const pb::Data reply = sampleData(pb::CMD_REPLY, DType::kFloat32, 4);
  // A declare without a name and an error without a text: only the field under test is set.
  pb::Data declare = sampleData(pb::CMD_DECLARE, DType::kFloat32, 4);
  declare.mutable_declare()->clear_name();
  pb::Data error = sampleData(pb::CMD_ERROR, DType::kFloat32, 0);
  error.mutable_error()->clear_text();

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
  cases.push_back({"unknown envelope field only", [] { return std::vector<Blob>{bytesOf(std::string("\x28\x05", 2))}; },
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
  cases.push_back({"unknown tensor op 99", [=] { return std::vector<Blob>{dataFrame(withOp(pull, 99))}; },
                   "tensor op 99 is unknown"});
  cases.push_back({"unspecified tensor op", [=] { return std::vector<Blob>{dataFrame(withOp(pull, 0))}; },
                   "tensor op 0 is unknown"});
  cases.push_back({"negative tensor op", [=] { return std::vector<Blob>{dataFrame(withOp(pull, -1))}; }, "is unknown"});
  cases.push_back({"data message without a body",
                   [=] {
                     pb::Data d = pull;
                     d.clear_tensor();
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "data message has no (known) body"});
  for (uint32_t version : {0u, 1u, 3u}) {
    cases.push_back({"protocol version " + std::to_string(version) + " on a pull",
                     [=] {
                       pb::Data d = pull;
                       d.set_protocol_version(version);
                       return std::vector<Blob>{dataFrame(d)};
                     },
                     "the peer speaks zps protocol version " + std::to_string(version) + ", this node version 2"});
  }
  cases.push_back({"a version-1 pull",
                   [] {
                     pb::Version1Data named;
                     named.set_command(pb::CMD_PULL);
                     named.set_request_id(99);
                     return std::vector<Blob>{version1Frame(named, {{3, kSampleKey}, {4, 12}, {6, 4}})};
                   },
                   "the peer speaks zps protocol version 1, this node speaks version 2"});
  cases.push_back({"unknown dtype 7",
                   [=] {
                     auto d = pull;
                     d.mutable_tensor()->set_dtype(7);
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "dtype 7 is unknown"});
  cases.push_back({"unknown dtype UINT32_MAX",
                   [=] {
                     auto d = pull;
                     d.mutable_tensor()->set_dtype(UINT32_MAX);
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "is unknown"});
  cases.push_back({"unknown key mode 5",
                   [=] {
                     auto d = declare;
                     d.mutable_declare()->set_mode(static_cast<pb::KeyMode>(5));
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "key mode 5 is unknown"});
  cases.push_back({"unknown key mode -3",
                   [=] {
                     auto d = declare;
                     d.mutable_declare()->set_mode(static_cast<pb::KeyMode>(-3));
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "key mode -3 is unknown"});
  cases.push_back({"push without payload", [=] { return std::vector<Blob>{dataFrame(push)}; },
                   "CMD_PUSH is missing its payload frame"});
  cases.push_back({"push_pull without payload",
                   [=] { return std::vector<Blob>{dataFrame(withOp(push, pb::OP_PUSH_PULL))}; },
                   "CMD_PUSH_PULL is missing its payload frame"});
  cases.push_back(
      {"pull with payload", [=] { return encodeData(pull, payloadOf(16)); }, "CMD_PULL must not carry a payload"});
  cases.push_back({"declare with payload", [=] { return encodeData(declare, payloadOf(16)); },
                   "CMD_DECLARE must not carry a payload"});
  cases.push_back(
      {"error with payload", [=] { return encodeData(error, payloadOf(16)); }, "CMD_ERROR must not carry a payload"});
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
  cases.push_back({"reply payload of the wrong size", [=] { return encodeData(reply, payloadOf(8)); }, "needs 16"});
  cases.push_back({"num_elements UINT64_MAX float32",
                   [=] {
                     auto d = push;
                     d.mutable_tensor()->set_num_elements(UINT64_MAX);
                     return encodeData(d, payloadOf(16));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements UINT64_MAX uint8",
                   [=] {
                     auto d = push;
                     d.mutable_tensor()->set_dtype(static_cast<uint32_t>(DType::kUInt8));
                     d.mutable_tensor()->set_num_elements(UINT64_MAX);
                     return encodeData(d, payloadOf(16));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements wrapping to a small size",
                   [=] {
                     // 2^62 * 4 wraps to 0 in 64 bits; an unchecked multiply would accept an
                     // empty payload.
                     auto d = push;
                     d.mutable_tensor()->set_num_elements(uint64_t{1} << 62);
                     return encodeData(d, Blob::copyOf(nullptr, 0));
                   },
                   "exceeds the payload limit"});
  cases.push_back({"num_elements too large for a pull",
                   [=] {
                     auto d = pull;
                     d.mutable_tensor()->set_num_elements(UINT64_MAX);
                     return std::vector<Blob>{dataFrame(d)};
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
  cases.push_back({"declare.name too long",
                   [=] {
                     auto d = declare;
                     d.mutable_declare()->set_name(big);
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "declare.name is 4097 bytes"});
  cases.push_back({"error.text too long",
                   [=] {
                     auto d = error;
                     d.mutable_error()->set_text(big);
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "error.text is 4097 bytes"});
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
  cases.push_back({"awaited rounds beyond the limit",
                   [] {
                     pb::Data d = sampleData(pb::CMD_REPLY, DType::kFloat32, 0);
                     for (int i = 0; i <= kMaxAwaitedRounds; ++i) d.mutable_reply()->add_awaited()->set_key(i);
                     return encodeData(d);
                   },
                   "names 17 awaited rounds, at most 16"});
  for (pb::DataCommand command : {pb::CMD_PULL, pb::CMD_PUSH_PULL}) {
    cases.push_back({pb::DataCommand_Name(command) + " that claims push credit",
                     [=] {
                       pb::Data d = sampleData(command, DType::kFloat32, 4);
                       d.mutable_tensor()->set_holds_credit(true);
                       return encodeData(d, command == pb::CMD_PULL ? Blob() : payloadOf(16));
                     },
                     pb::DataCommand_Name(command) + " must not hold push credit; only a PUSH does"});
  }
  cases.push_back({"a rows pull with a rows frame",
                   [] {
                     pb::Data d;
                     d.mutable_rows()->set_count(1);
                     d.mutable_rows()->set_row_dim(2);
                     return encodeRows(d, payloadOf(8), payloadOf(8));
                   },
                   "CMD_PULL_ROWS needs 2 frames, got 3"});
  cases.push_back({"a fused entry that names a protocol version",
                   [=] {
                     pb::Data d;
                     d.set_protocol_version(kProtocolVersion);
                     *d.mutable_fused()->add_entries() = pull;
                     return std::vector<Blob>{dataFrame(d)};
                   },
                   "entries take the fused message's"});
  cases.push_back({"a heartbeat with one table too many",
                   [] { return encodeControl(sampleHeartbeatWithTables(kMaxHeartbeatTables + 1, 8)); },
                   "heartbeat has 129 tables, at most 128"});
  cases.push_back({"a heartbeat table name over the string limit",
                   [] { return encodeControl(sampleHeartbeatWithTables(1, Limits().max_string_bytes + 1)); },
                   "heartbeat table name is 4097 bytes"});
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
  pb::Data reply = sampleData(pb::CMD_REPLY, DType::kFloat32, 0);
  for (int i = 0; i < kMaxAwaitedRounds; ++i) reply.mutable_reply()->add_awaited()->set_key(i);
  CHECK(decode(encodeData(reply), Limits()).ok());
  // The most tables, each with the longest name, still fit the default envelope.
  CHECK(
      decode(encodeControl(sampleHeartbeatWithTables(kMaxHeartbeatTables, Limits().max_string_bytes)), Limits()).ok());
  pb::Data paced = sampleData(pb::CMD_PUSH, DType::kFloat32, 4);
  paced.mutable_tensor()->set_holds_credit(true);
  CHECK(decode(encodeData(paced, payloadOf(16)), Limits()).ok());
}

// A peer of protocol version 1 sent every command as one flat header in the envelope's field 2. Its
// HELLO is refused naming both versions, with what a server needs to answer it in that framing; the
// answer is an ERROR that a version-1 decoder reads.
TEST_CASE("codec: version 1 is refused with a message naming both versions, and answered in its framing", "[codec]") {
  // The flat header's worker_rank (field 12) follows the fields version 2 reads.
  pb::Version1Data hello;
  hello.set_command(pb::CMD_HELLO);
  hello.set_request_id(41);
  hello.set_magic(kMagic);
  hello.set_protocol_version(1);
  pb::Data rejected;
  auto decoded = decode({version1Frame(hello, {{12, 2}})}, Limits(), &rejected);
  REQUIRE_FALSE(decoded.ok());
  CHECK(decoded.status().code() == StatusCode::kProtocol);
  CHECK(decoded.status().message() == version1Refusal());
  CHECK_THAT(version1Refusal(), Catch::Contains("version 1") && Catch::Contains("version 2"));
  CHECK(rejected.protocol_version() == 1);
  CHECK(commandOf(rejected) == pb::CMD_HELLO);
  CHECK(rejected.request_id() == 41);

  // The answer, read as version 1 did: field 2 of the envelope is the flat header.
  const std::vector<Blob> answer = encodeVersion1Error(41, version1Refusal());
  REQUIRE(answer.size() == 1);
  pb::Envelope env;
  REQUIRE(env.ParseFromArray(answer[0].data(), static_cast<int>(answer[0].size())));
  REQUIRE(env.has_version1_data());
  const pb::Version1Data& old = env.version1_data();
  CHECK(old.command() == pb::CMD_ERROR);
  CHECK(old.request_id() == 41);
  CHECK(old.error() == version1Refusal());

  // A version-2 HELLO that names another version passes the codec: the server refuses it in words.
  pb::Data other = sampleData(pb::CMD_HELLO, DType::kFloat32, 0);
  other.set_protocol_version(3);
  auto passed = decode(encodeData(other), Limits());
  REQUIRE(passed.ok());
  CHECK(std::get<DataMessage>(*passed).data.protocol_version() == 3);
}

TEST_CASE("codec: every truncation of a valid header is rejected", "[codec]") {
  std::vector<std::vector<Blob>> messages = {
      encodeControl(sampleRegister()),
      encodeControl(sampleRegisterReply(3)),
      encodeData(sampleData(pb::CMD_DECLARE, DType::kFloat16, 9)),
      encodeData(sampleData(pb::CMD_PUSH, DType::kFloat32, 4), payloadOf(16)),
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
