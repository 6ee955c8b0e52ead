// Samples for the wire codec's tests (ps/wire/codec.h): one valid message of every control body and
// data command, frames built by hand so a test can put any value in a message, and a guard that keeps
// libprotobuf quiet during fuzz loops. Shared by the codec*_test.cc files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/stubs/common.h>

#include "ps/wire/codec.h"

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

inline void appendVarint(std::string* out, uint64_t n) {
  for (;; n >>= 7) {
    out->push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    if (n < 0x80) break;
  }
}

// A data message as protocol version 1 framed it: one flat header as the envelope's field 2, of which
// pb::Version1Data names the fields version 2 still reads. `more` are the flat header's other integer
// fields (field number, value), which follow those in the samples (key 3, round 4, num_elements 6,
// worker_rank 12).
inline Blob version1Frame(const pb::Version1Data& named, const std::vector<std::pair<uint32_t, uint64_t>>& more = {}) {
  std::string body = named.SerializeAsString();
  for (const auto& [field, value] : more) {
    appendVarint(&body, uint64_t{field} << 3);  // wire type 0: varint
    appendVarint(&body, value);
  }
  std::string frame(1, static_cast<char>((2 << 3) | 2));  // field 2, length-delimited
  appendVarint(&frame, body.size());
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

inline constexpr uint64_t kSampleKey = (uint64_t{5} << 24) | 3;

// A message of `command` with the fields its body carries (so that it survives a round trip): request
// 99, and where the body has them `key`, round 12, `dtype` and `num_elements`.
inline pb::Data sampleData(pb::DataCommand command, DType dtype, uint64_t num_elements, uint64_t key = kSampleKey) {
  pb::Data d;
  d.set_protocol_version(kProtocolVersion);
  d.set_request_id(99);
  const uint32_t dtype_value = static_cast<uint32_t>(dtype);
  switch (command) {
    case pb::CMD_HELLO:
      d.mutable_hello()->set_magic(kMagic);
      d.mutable_hello()->set_worker_rank(2);
      break;
    case pb::CMD_DECLARE: {
      pb::Declare* b = d.mutable_declare();
      b->set_key(key);
      b->set_mode(pb::MODE_SUM);
      b->set_dtype(dtype_value);
      b->set_num_elements(num_elements);
      b->set_name("layer1.weight");
      break;
    }
    case pb::CMD_PUSH:
    case pb::CMD_PULL:
    case pb::CMD_PUSH_PULL: {
      pb::Tensor* b = d.mutable_tensor();
      b->set_op(tensorOp(command));
      b->set_key(key);
      b->set_round(12);
      b->set_dtype(dtype_value);
      b->set_num_elements(num_elements);
      break;
    }
    case pb::CMD_PUSH_ROWS:
    case pb::CMD_PULL_ROWS: {
      pb::Rows* b = d.mutable_rows();
      b->set_push(command == pb::CMD_PUSH_ROWS);
      b->set_key(key);
      b->set_round(12);
      b->set_count(num_elements);
      break;
    }
    case pb::CMD_REPLY: {
      pb::Reply* b = d.mutable_reply();
      b->set_key(key);
      b->set_round(12);
      b->set_dtype(dtype_value);
      b->set_num_elements(num_elements);
      break;
    }
    case pb::CMD_ERROR:
      d.mutable_error()->set_key(key);
      d.mutable_error()->set_round(12);
      d.mutable_error()->set_text("key was never declared");
      break;
    case pb::CMD_CHECKPOINT:
      d.mutable_checkpoint()->set_key(key);
      d.mutable_checkpoint()->set_step(12);
      break;
    case pb::CMD_STATS: d.mutable_stats(); break;
    default: break;  // no body
  }
  return d;
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
