// Tests for the wire codec (ps/wire/codec.cc): golden round trips of every control body and every
// data command, a table of malformed inputs that must each come back as a kProtocol status, and a
// fixed-seed fuzz loop that feeds random byte strings to decode().
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/common.h>
#include <catch2/catch.hpp>

#include "ps/wire/codec.h"

// libprotobuf logs an ERROR line for every string field that is not UTF-8; the fuzz loops below
// produce thousands. Protobuf 3.21 and older can silence that; newer releases log through Abseil.
#if defined(GOOGLE_PROTOBUF_VERSION) && GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#define ZPS_HAVE_LOG_SILENCER 1
#endif

namespace zps::wire {
namespace {

Blob bytesOf(const std::string& s) { return Blob::fromString(s); }

// Suppresses libprotobuf's log lines while alive (where the protobuf version allows it).
class QuietProtobuf {
#ifdef ZPS_HAVE_LOG_SILENCER
  google::protobuf::LogSilencer silencer_;
#endif
};

// An envelope frame holding `header`, serialized by hand so tests can put any value in it.
Blob dataFrame(const pb::DataHeader& header) {
  pb::Envelope env;
  *env.mutable_data() = header;
  return Blob::fromString(env.SerializeAsString());
}

Blob payloadOf(size_t bytes, uint8_t seed = 1) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7);
  return Blob::copyOf(data.data(), data.size());
}

pb::Control sampleRegister() {
  pb::Control c;
  auto* r = c.mutable_register_();
  r->set_magic(kMagic);
  r->set_protocol_version(kProtocolVersion);
  r->set_role(pb::WORKER);
  r->set_host("10.0.0.7");
  r->set_port(0);
  r->set_requested_rank(3);
  r->set_rank_source("DMLC_WORKER_ID");
  r->set_hostname("job-worker-3");
  r->set_pid(4242);
  r->set_expected_servers(2);
  r->set_expected_workers(4);
  return c;
}

pb::Control sampleRegisterReply(int nodes) {
  pb::Control c;
  auto* r = c.mutable_register_reply();
  r->set_accepted(true);
  r->set_rank(1);
  r->set_heartbeat_interval_ms(5000);
  r->set_heartbeat_timeout_ms(30000);
  for (int i = 0; i < nodes; ++i) {
    auto* n = r->add_nodes();
    n->set_role(i % 2 == 0 ? pb::SERVER : pb::WORKER);
    n->set_rank(i / 2);
    n->set_host("10.0.0." + std::to_string(i + 1));
    n->set_port(i % 2 == 0 ? 9000 + i : 0);
    n->set_hostname("host-" + std::to_string(i));
    n->set_pid(100 + i);
  }
  return c;
}

// One sample of every control body.
std::vector<std::pair<std::string, pb::Control>> allControlBodies() {
  std::vector<std::pair<std::string, pb::Control>> out;
  out.emplace_back("register", sampleRegister());
  out.emplace_back("register_reply", sampleRegisterReply(4));
  {
    pb::Control c;
    c.mutable_register_reply()->set_accepted(false);
    c.mutable_register_reply()->set_error("worker rank 3 is already taken");
    out.emplace_back("register_reply refusal", c);
  }
  for (pb::BarrierGroup g : {pb::GROUP_WORKERS, pb::GROUP_SERVERS, pb::GROUP_ALL}) {
    pb::Control c;
    c.mutable_barrier()->set_group(g);
    c.mutable_barrier()->set_sequence(17);
    out.emplace_back("barrier " + pb::BarrierGroup_Name(g), c);
    pb::Control r;
    r.mutable_barrier_release()->set_group(g);
    r.mutable_barrier_release()->set_sequence(17);
    out.emplace_back("barrier_release " + pb::BarrierGroup_Name(g), r);
  }
  {
    pb::Control c;
    c.mutable_heartbeat()->set_sent_unix_ms(1700000000123ULL);
    out.emplace_back("heartbeat", c);
  }
  {
    pb::Control c;
    c.mutable_finished()->set_ok(false);
    c.mutable_finished()->set_message("program returned 3");
    out.emplace_back("finished", c);
  }
  {
    pb::Control c;
    c.mutable_recovery()->set_generation(2);
    c.mutable_recovery()->set_lost("server 1 (10.0.0.2:9100, pid 7) sent no heartbeat for 30 s");
    out.emplace_back("recovery", c);
  }
  for (int code : {0, 1, 255}) {
    pb::Control c;
    c.mutable_shutdown()->set_exit_code(code);
    c.mutable_shutdown()->set_reason("job done");
    out.emplace_back("shutdown " + std::to_string(code), c);
  }
  return out;
}

pb::DataHeader sampleHeader(pb::DataCommand command, DType dtype, uint64_t num_elements) {
  pb::DataHeader h;
  h.set_command(command);
  h.set_request_id(99);
  h.set_key((uint64_t{5} << 24) | 3);
  h.set_round(12);
  h.set_dtype(static_cast<uint32_t>(dtype));
  h.set_num_elements(num_elements);
  h.set_mode(pb::MODE_SUM);
  if (command == pb::CMD_DECLARE) h.set_name("layer1.weight");
  if (command == pb::CMD_ERROR) h.set_error("key was never declared");
  if (command == pb::CMD_HELLO) {
    h.set_magic(kMagic);
    h.set_protocol_version(kProtocolVersion);
    h.set_worker_rank(2);
  }
  return h;
}

bool hasPayload(pb::DataCommand c) { return c == pb::CMD_PUSH || c == pb::CMD_PUSH_PULL; }
bool mayHavePayload(pb::DataCommand c) { return hasPayload(c) || c == pb::CMD_REPLY; }

const pb::DataCommand kAllCommands[] = {pb::CMD_HELLO,     pb::CMD_DECLARE, pb::CMD_PUSH, pb::CMD_PULL,
                                        pb::CMD_PUSH_PULL, pb::CMD_REPLY,   pb::CMD_ERROR};

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

// Checks one fuzzed decode: a kProtocol error with a message, or a message that obeys the codec's
// promises. Counts the outcome.
void checkFuzzed(const std::vector<Blob>& frames, const Limits& limits, int* ok, int* protocol) {
  auto decoded = decode(frames, limits);
  if (!decoded.ok()) {
    ++*protocol;
    CHECK(decoded.status().code() == StatusCode::kProtocol);
    CHECK_FALSE(decoded.status().message().empty());
    return;
  }
  ++*ok;
  if (auto* data = std::get_if<DataMessage>(&*decoded)) {
    CHECK(pb::DataCommand_IsValid(data->header.command()));
    CHECK(data->header.command() != pb::CMD_UNSPECIFIED);
    CHECK(data->header.dtype() < static_cast<uint32_t>(kNumDTypes));
    uint64_t bytes = 0;
    REQUIRE(checkedBytes(data->header.num_elements(), dtypeSize(data->dtype), &bytes));
    CHECK(bytes <= limits.max_payload_bytes);
    if (frames.size() == 2) {
      CHECK(data->payload.size() == bytes);
    } else {
      CHECK(data->payload.empty());
      CHECK_FALSE(hasPayload(data->header.command()));
    }
  } else {
    CHECK(frames.size() == 1);
    CHECK(std::get<pb::Control>(*decoded).body_case() != pb::Control::BODY_NOT_SET);
  }
}

TEST_CASE("codec: text fields that are not UTF-8 still decode (they are bytes)", "[codec]") {
  // Peer text is opaque bytes capped in length: a cut character or a non-UTF-8 host name must not
  // turn a message (for example an error reply) into an undecodable one.
  auto c = sampleRegister();
  c.mutable_register_()->set_hostname("host\xff\xfe");
  auto decoded = decode(encodeControl(c), Limits());
  REQUIRE(decoded.ok());
  CHECK(std::get<pb::Control>(*decoded).register_().hostname() == "host\xff\xfe");
  auto h = sampleHeader(pb::CMD_DECLARE, DType::kFloat32, 4);
  h.set_name(std::string("grad\xc3", 5));  // a character cut in half
  auto data = decode(encodeData(h), Limits());
  REQUIRE(data.ok());
  CHECK(std::get<DataMessage>(*data).header.name() == std::string("grad\xc3", 5));
}

TEST_CASE("codec: random byte strings never crash decode", "[codec]") {
  QuietProtobuf quiet;
  std::mt19937_64 rng(0x5A505331);
  std::uniform_int_distribution<int> len_dist(0, 96);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> frames_dist(1, 3);
  Limits limits;
  limits.max_payload_bytes = 1 << 16;
  int ok = 0;
  int protocol = 0;
  auto randomBytes = [&] {
    std::string s(static_cast<size_t>(len_dist(rng)), '\0');
    for (auto& ch : s) ch = static_cast<char>(byte_dist(rng));
    return s;
  };
  for (int i = 0; i < 4000; ++i) {
    std::vector<Blob> frames;
    int n = frames_dist(rng);
    for (int f = 0; f < n; ++f) frames.push_back(Blob::fromString(randomBytes()));
    // Every fourth message starts with a valid envelope tag so the fuzzer gets past the first byte.
    if (i % 4 == 0) {
      std::string head(frames[0].view());
      head.insert(0, std::string(1, (i % 8 == 0) ? '\x0a' : '\x12'));
      head.insert(1, std::string(1, static_cast<char>(head.size() - 1)));
      frames[0] = Blob::fromString(head);
    }
    checkFuzzed(frames, limits, &ok, &protocol);
  }
  CHECK(ok + protocol == 4000);
  CHECK(protocol > 0);
}

TEST_CASE("codec: valid messages with random byte mutations never crash decode", "[codec]") {
  QuietProtobuf quiet;
  std::vector<std::vector<Blob>> corpus;
  for (const auto& [name, control] : allControlBodies()) corpus.push_back(encodeControl(control));
  for (pb::DataCommand cmd : kAllCommands) {
    pb::DataHeader h = sampleHeader(cmd, DType::kInt32, 3);
    corpus.push_back(hasPayload(cmd) ? encodeData(h, payloadOf(12)) : encodeData(h));
  }
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  std::uniform_int_distribution<int> edits_dist(1, 3);
  std::uniform_int_distribution<int> kind_dist(0, 9);
  Limits limits;
  int ok = 0;
  int protocol = 0;
  const int kIterations = 4000;
  for (int i = 0; i < kIterations; ++i) {
    std::vector<Blob> frames = corpus[static_cast<size_t>(i) % corpus.size()];
    std::string head(frames[0].view());
    int edits = edits_dist(rng);
    for (int e = 0; e < edits && !head.empty(); ++e) {
      size_t pos = std::uniform_int_distribution<size_t>(0, head.size() - 1)(rng);
      int kind = kind_dist(rng);
      if (kind < 6) {  // overwrite a byte
        head[pos] = static_cast<char>(byte_dist(rng));
      } else if (kind < 8) {  // flip a bit
        head[pos] = static_cast<char>(head[pos] ^ (1 << (kind_dist(rng) % 8)));
      } else if (kind == 8) {  // truncate
        head.resize(pos);
      } else {  // insert a byte
        head.insert(pos, 1, static_cast<char>(byte_dist(rng)));
      }
    }
    frames[0] = Blob::fromString(head);
    // Now and then a payload frame where none may be, or none where one must be.
    if (i % 10 == 0) frames.push_back(payloadOf(12));
    if (i % 10 == 5 && frames.size() == 2) frames.pop_back();
    checkFuzzed(frames, limits, &ok, &protocol);
  }
  CHECK(ok + protocol == kIterations);
  // Both outcomes occur, so the loop exercises the validation after a successful parse.
  CHECK(ok > 100);
  CHECK(protocol > 100);
}

}  // namespace
}  // namespace zps::wire
