#include "ps/wire/codec.h"

#include <cstring>
#include <string>

#include "ps/wire/data_codec.h"

namespace zps::wire {
namespace {

using detail::checkString;

Status checkRole(const char* field, int role) {
  if (!pb::Role_IsValid(role) || role == pb::ROLE_UNSPECIFIED)
    return ProtocolError(std::string(field) + " has invalid role value " + std::to_string(role));
  return Status::OK();
}

Status checkGroup(int group) {
  if (!pb::BarrierGroup_IsValid(group) || group == pb::GROUP_UNSPECIFIED)
    return ProtocolError("barrier group " + std::to_string(group) + " is out of range (1..3)");
  return Status::OK();
}

Status validateControl(const pb::Control& c, const Limits& limits) {
  switch (c.body_case()) {
    case pb::Control::kRegister: {
      const auto& r = c.register_();
      ZPS_RETURN_IF_ERROR(checkRole("register.role", r.role()));
      if (r.role() == pb::SCHEDULER) return ProtocolError("a node cannot register as the scheduler");
      if (r.port() > 65535) return ProtocolError("register.port " + std::to_string(r.port()) + " > 65535");
      if (r.requested_rank() < -1) return ProtocolError("register.requested_rank is negative");
      ZPS_RETURN_IF_ERROR(checkString("register.host", r.host(), limits));
      ZPS_RETURN_IF_ERROR(checkString("register.hostname", r.hostname(), limits));
      ZPS_RETURN_IF_ERROR(checkString("register.rank_source", r.rank_source(), limits));
      ZPS_RETURN_IF_ERROR(checkString("register.auth_nonce", r.auth_nonce(), limits));
      ZPS_RETURN_IF_ERROR(checkString("register.auth_mac", r.auth_mac(), limits));
      if (r.barriers_released_size() > 4)
        return ProtocolError("register.barriers_released has " + std::to_string(r.barriers_released_size()) +
                             " entries, at most 4 (one per barrier group)");
      return Status::OK();
    }
    case pb::Control::kRegisterReply: {
      const auto& r = c.register_reply();
      ZPS_RETURN_IF_ERROR(checkString("register_reply.error", r.error(), limits));
      ZPS_RETURN_IF_ERROR(checkString("register_reply.auth_mac", r.auth_mac(), limits));
      if (static_cast<size_t>(r.nodes_size()) > limits.max_address_book)
        return ProtocolError("address book has " + std::to_string(r.nodes_size()) + " nodes, over the limit");
      for (const auto& n : r.nodes()) {
        ZPS_RETURN_IF_ERROR(checkRole("address book role", n.role()));
        if (n.rank() < 0) return ProtocolError("address book has a negative rank");
        if (n.port() > 65535) return ProtocolError("address book has port > 65535");
        ZPS_RETURN_IF_ERROR(checkString("address book host", n.host(), limits));
        ZPS_RETURN_IF_ERROR(checkString("address book hostname", n.hostname(), limits));
      }
      return Status::OK();
    }
    case pb::Control::kBarrier: return checkGroup(c.barrier().group());
    case pb::Control::kBarrierRelease: return checkGroup(c.barrier_release().group());
    case pb::Control::kHeartbeat: {
      const auto& hb = c.heartbeat();
      if (static_cast<size_t>(hb.tables_size()) > limits.max_heartbeat_tables)
        return ProtocolError("heartbeat has " + std::to_string(hb.tables_size()) + " tables, at most " +
                             std::to_string(limits.max_heartbeat_tables));
      for (const auto& t : hb.tables()) ZPS_RETURN_IF_ERROR(checkString("heartbeat table name", t.name(), limits));
      return Status::OK();
    }
    case pb::Control::kShutdownAck: return Status::OK();
    case pb::Control::kFinished: return checkString("finished.message", c.finished().message(), limits);
    case pb::Control::kGoodbye: return checkString("goodbye.reason", c.goodbye().reason(), limits);
    case pb::Control::kRecovery: return checkString("recovery.lost", c.recovery().lost(), limits);
    case pb::Control::kShutdown:
      if (c.shutdown().exit_code() < 0 || c.shutdown().exit_code() > 255)
        return ProtocolError("shutdown.exit_code out of range");
      return checkString("shutdown.reason", c.shutdown().reason(), limits);
    case pb::Control::BODY_NOT_SET: break;
  }
  return ProtocolError("control message has no (known) body");
}

}  // namespace

bool checkedBytes(uint64_t num_elements, size_t element_size, uint64_t* bytes) {
  if (element_size != 0 && num_elements > UINT64_MAX / element_size) return false;
  *bytes = num_elements * element_size;
  return true;
}

const char* roleName(pb::Role role) {
  switch (role) {
    case pb::SCHEDULER: return "scheduler";
    case pb::SERVER: return "server";
    case pb::WORKER: return "worker";
    default: return "unknown-role";
  }
}

StatusOr<Message> decode(const std::vector<Blob>& frames, const Limits& limits, pb::Data* rejected) {
  if (frames.empty()) return ProtocolError("empty message (no frames)");
  if (frames.size() > limits.max_frames)
    return ProtocolError("message has " + std::to_string(frames.size()) + " frames, at most " +
                         std::to_string(limits.max_frames) + " allowed");
  const Blob& head = frames[0];
  if (head.size() > limits.max_envelope_bytes)
    return ProtocolError("header frame is " + std::to_string(head.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_envelope_bytes));
  if (head.size() > static_cast<size_t>(INT32_MAX)) return ProtocolError("header frame too large");
  pb::Envelope env;
  if (!env.ParseFromArray(head.data(), static_cast<int>(head.size())))
    return ProtocolError("header frame of " + std::to_string(head.size()) + " bytes is not a valid envelope");

  if (env.body_case() == pb::Envelope::kControl) {
    if (frames.size() != 1) return ProtocolError("control message must not carry payload frames");
    ZPS_RETURN_IF_ERROR(validateControl(env.control(), limits));
    return Message(std::move(*env.mutable_control()));
  }
  if (env.body_case() == pb::Envelope::kVersion1Data) {
    // Version 1 put every command in one flat header; enough of it is read to answer its HELLO.
    const auto& v1 = env.version1_data();
    if (rejected != nullptr) {
      rejected->set_request_id(v1.request_id());
      rejected->set_protocol_version(1);
      if (v1.command() == pb::CMD_HELLO) rejected->mutable_hello();
    }
    return ProtocolError(version1Refusal());
  }
  if (env.body_case() != pb::Envelope::kData) return ProtocolError("envelope has no (known) body");

  DataMessage msg;
  Status s = detail::decodeData(std::move(*env.mutable_data()), frames, limits, msg);
  if (!s.ok()) {
    if (rejected != nullptr) {
      *rejected = std::move(msg.data);
      // Its entries are answered one by one, so only a count the server would accept is kept.
      if (rejected->has_fused() && static_cast<size_t>(rejected->fused().entries_size()) > limits.max_fused_entries)
        rejected->mutable_fused()->clear_entries();
    }
    return s;
  }
  return Message(std::move(msg));
}

std::string version1Refusal() {
  return "protocol mismatch: the peer speaks zps protocol version 1, this node speaks version " +
         std::to_string(kProtocolVersion) + "; run the same zps release on every node";
}

std::vector<Blob> encodeVersion1Error(uint64_t request_id, const std::string& error) {
  pb::Envelope env;
  pb::Version1Data* v1 = env.mutable_version1_data();
  v1->set_command(pb::CMD_ERROR);
  v1->set_request_id(request_id);
  v1->set_error(error);
  return {Blob::fromString(env.SerializeAsString())};
}

uint64_t DataMessage::keyAt(size_t i) const {
  uint64_t k;
  std::memcpy(&k, keys.data() + i * sizeof(uint64_t), sizeof(k));
  return k;
}

std::vector<Blob> encodeControl(const pb::Control& control) {
  pb::Envelope env;
  *env.mutable_control() = control;
  return {Blob::fromString(env.SerializeAsString())};
}

std::vector<Blob> encodeData(pb::Data data, Blob payload) {
  if (data.protocol_version() == 0) data.set_protocol_version(kProtocolVersion);
  return encodeBody(std::move(data), std::move(payload));
}

std::vector<Blob> encodeBody(pb::Data data, Blob payload) {
  pb::Envelope env;
  *env.mutable_data() = std::move(data);
  std::vector<Blob> frames;
  frames.reserve(2);
  frames.push_back(Blob::fromString(env.SerializeAsString()));
  if (payload.data() != nullptr) frames.push_back(std::move(payload));
  return frames;
}

std::vector<Blob> encodeRows(pb::Data data, Blob keys, Blob rows) {
  std::vector<Blob> frames = encodeData(std::move(data));
  frames.push_back(std::move(keys));
  if (rows.data() != nullptr) frames.push_back(std::move(rows));
  return frames;
}

pb::DataCommand commandOf(const pb::Data& d) {
  switch (d.body_case()) {
    case pb::Data::kHello: return pb::CMD_HELLO;
    case pb::Data::kDeclare: return pb::CMD_DECLARE;
    case pb::Data::kTensor:
      switch (d.tensor().op()) {
        case pb::OP_PUSH: return pb::CMD_PUSH;
        case pb::OP_PULL: return pb::CMD_PULL;
        case pb::OP_PUSH_PULL: return pb::CMD_PUSH_PULL;
        default: return pb::CMD_UNSPECIFIED;
      }
    case pb::Data::kRows: return d.rows().push() ? pb::CMD_PUSH_ROWS : pb::CMD_PULL_ROWS;
    case pb::Data::kCheckpoint: return pb::CMD_CHECKPOINT;
    case pb::Data::kStats: return pb::CMD_STATS;
    case pb::Data::kHelloReply:
    case pb::Data::kStatsReply:
    case pb::Data::kReply: return pb::CMD_REPLY;
    case pb::Data::kError: return pb::CMD_ERROR;
    case pb::Data::kFused: return pb::CMD_FUSED;
    case pb::Data::BODY_NOT_SET: break;
  }
  return pb::CMD_UNSPECIFIED;
}

uint64_t keyOf(const pb::Data& d) {
  switch (d.body_case()) {
    case pb::Data::kDeclare: return d.declare().key();
    case pb::Data::kTensor: return d.tensor().key();
    case pb::Data::kRows: return d.rows().key();
    case pb::Data::kCheckpoint: return d.checkpoint().key();
    case pb::Data::kReply: return d.reply().key();
    case pb::Data::kError: return d.error().key();
    default: return 0;
  }
}

uint64_t roundOf(const pb::Data& d) {
  switch (d.body_case()) {
    case pb::Data::kTensor: return d.tensor().round();
    case pb::Data::kRows: return d.rows().round();
    case pb::Data::kCheckpoint: return d.checkpoint().step();
    case pb::Data::kReply: return d.reply().round();
    case pb::Data::kError: return d.error().round();
    default: return 0;
  }
}

pb::TensorOp tensorOp(pb::DataCommand command) {
  switch (command) {
    case pb::CMD_PUSH: return pb::OP_PUSH;
    case pb::CMD_PULL: return pb::OP_PULL;
    case pb::CMD_PUSH_PULL: return pb::OP_PUSH_PULL;
    default: return pb::OP_UNSPECIFIED;
  }
}

}  // namespace zps::wire
