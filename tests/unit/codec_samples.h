// Samples for the wire codec's tests (ps/wire/codec.h): one valid message of every control body and
// data command, frames built by hand so a test can put any value in a header, and a guard that keeps
// libprotobuf quiet during fuzz loops. Shared by the codec*_test.cc files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/common.h>

#include "ps/wire/codec.h"
#include "ps/wire/data_codec.h"

// libprotobuf logs an ERROR line for every string field that is not UTF-8; the fuzz loops of
// codec_fuzz_test.cc produce thousands. Protobuf 3.21 and older can silence that; newer releases log
// through Abseil.
#if defined(GOOGLE_PROTOBUF_VERSION) && GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#define ZPS_HAVE_LOG_SILENCER 1
#endif

namespace zps::wire::codec_testing {

inline Blob bytesOf(const std::string& s) { return Blob::fromString(s); }

// Suppresses libprotobuf's log lines while alive (where the protobuf version allows it).
class QuietProtobuf {
#ifdef ZPS_HAVE_LOG_SILENCER
  google::protobuf::LogSilencer silencer_;
#endif
};

// An envelope frame holding `data`, serialized by hand so tests can put any value in it.
inline Blob dataFrame(const pb::Data& data) {
  pb::Envelope env;
  *env.mutable_data() = data;
  return Blob::fromString(env.SerializeAsString());
}

// The frame the encoder would send for `header`, without the encoder's checks.
inline Blob dataFrame(const pb::DataHeader& header) { return dataFrame(detail::fromHeader(header)); }

// A data message as protocol version 1 framed it: the flat header (whose field numbers pb::DataHeader
// keeps) as the envelope's field 2.
inline Blob version1Frame(const pb::DataHeader& header) {
  const std::string body = header.SerializeAsString();
  std::string frame(1, static_cast<char>((2 << 3) | 2));  // field 2, length-delimited
  for (uint64_t n = body.size();; n >>= 7) {
    frame.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    if (n < 0x80) break;
  }
  return Blob::fromString(frame + body);
}

inline Blob payloadOf(size_t bytes, uint8_t seed = 1) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed + i * 7);
  return Blob::copyOf(data.data(), data.size());
}

inline pb::Control sampleRegister() {
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

inline pb::Control sampleRegisterReply(int nodes) {
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

// A server's heartbeat with `tables` tables whose names are `name_bytes` long.
inline pb::Control sampleHeartbeatWithTables(size_t tables, size_t name_bytes) {
  pb::Control c;
  auto* hb = c.mutable_heartbeat();
  hb->set_table_budget_bytes(uint64_t{1} << 30);
  for (size_t i = 0; i < tables; ++i) {
    auto* t = hb->add_tables();
    t->set_name(std::string(name_bytes, static_cast<char>('a' + i % 26)));
    t->set_rows(1000 + i);
    t->set_bytes((1000 + i) * 160);
    t->set_created(2000 + i);
    t->set_evicted(1000);
  }
  return c;
}

// One sample of every control body.
inline std::vector<std::pair<std::string, pb::Control>> allControlBodies() {
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
  out.emplace_back("heartbeat with tables", sampleHeartbeatWithTables(3, 12));
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

// A header with the fields its command carries on the wire (so that it survives a round trip).
inline pb::DataHeader sampleHeader(pb::DataCommand command, DType dtype, uint64_t num_elements) {
  pb::DataHeader h;
  h.set_command(command);
  h.set_request_id(99);
  if (command == pb::CMD_HELLO) {
    h.set_magic(kMagic);
    h.set_protocol_version(kProtocolVersion);
    h.set_worker_rank(2);
    return h;
  }
  if (command == pb::CMD_STATS) return h;
  h.set_key((uint64_t{5} << 24) | 3);
  if (command != pb::CMD_DECLARE) h.set_round(12);
  if (command == pb::CMD_ERROR) {
    h.set_error("key was never declared");
    return h;
  }
  if (command == pb::CMD_CHECKPOINT) return h;
  h.set_dtype(static_cast<uint32_t>(dtype));
  h.set_num_elements(num_elements);
  if (command == pb::CMD_DECLARE) {
    h.set_mode(pb::MODE_SUM);
    h.set_name("layer1.weight");
  }
  return h;
}

inline bool hasPayload(pb::DataCommand c) { return c == pb::CMD_PUSH || c == pb::CMD_PUSH_PULL; }
inline bool mayHavePayload(pb::DataCommand c) { return hasPayload(c) || c == pb::CMD_REPLY; }
// Whether the command's body names a dtype (the others decode as float32).
inline bool carriesDtype(pb::DataCommand c) {
  return c == pb::CMD_DECLARE || c == pb::CMD_PUSH || c == pb::CMD_PULL || c == pb::CMD_PUSH_PULL || c == pb::CMD_REPLY;
}

inline const pb::DataCommand kAllCommands[] = {pb::CMD_HELLO, pb::CMD_DECLARE,    pb::CMD_PUSH,
                                               pb::CMD_PULL,  pb::CMD_PUSH_PULL,  pb::CMD_REPLY,
                                               pb::CMD_ERROR, pb::CMD_CHECKPOINT, pb::CMD_STATS};

}  // namespace zps::wire::codec_testing
