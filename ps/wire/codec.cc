#include "ps/wire/codec.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace zps::wire {
namespace {

Status checkString(const std::string& field, const std::string& value, const Limits& limits) {
  if (value.size() > limits.max_string_bytes)
    return ProtocolError(field + " is " + std::to_string(value.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_string_bytes));
  return Status::OK();
}

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
    case pb::Control::kHeartbeat: return Status::OK();
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

bool commandHasPayload(pb::DataCommand cmd) { return cmd == pb::CMD_PUSH || cmd == pb::CMD_PUSH_PULL; }

// PUSH_ROWS: [header, keys, rows]; PULL_ROWS: [header, keys]. Rows are float32.
Status validateRows(const std::vector<Blob>& frames, DataMessage& msg, const Limits& limits) {
  const auto& h = msg.header;
  const char* name = h.command() == pb::CMD_PUSH_ROWS ? "CMD_PUSH_ROWS" : "CMD_PULL_ROWS";
  size_t want_frames = h.command() == pb::CMD_PUSH_ROWS ? 3 : 2;
  if (frames.size() != want_frames)
    return ProtocolError(std::string(name) + " needs " + std::to_string(want_frames) + " frames, got " +
                         std::to_string(frames.size()));
  if (msg.dtype != DType::kFloat32) return ProtocolError(std::string(name) + " rows must be float32");
  if (h.row_dim() == 0 || h.row_dim() > limits.max_row_dim)
    return ProtocolError("row_dim " + std::to_string(h.row_dim()) + " is out of range [1, " +
                         std::to_string(limits.max_row_dim) + "]");
  uint64_t key_bytes = 0, row_floats = 0, row_bytes = 0;
  if (!checkedBytes(h.num_elements(), sizeof(uint64_t), &key_bytes) || key_bytes > limits.max_payload_bytes ||
      !checkedBytes(h.num_elements(), h.row_dim(), &row_floats) || !checkedBytes(row_floats, 4, &row_bytes) ||
      row_bytes > limits.max_payload_bytes)
    return ProtocolError(std::to_string(h.num_elements()) + " rows of " + std::to_string(h.row_dim()) +
                         " floats exceed the payload limit");
  if (frames[1].size() != key_bytes)
    return ProtocolError("keys frame is " + std::to_string(frames[1].size()) + " bytes but " +
                         std::to_string(h.num_elements()) + " keys need " + std::to_string(key_bytes));
  msg.keys = frames[1];
  if (want_frames == 3) {
    if (frames[2].size() != row_bytes)
      return ProtocolError("rows frame is " + std::to_string(frames[2].size()) + " bytes but " +
                           std::to_string(h.num_elements()) + " rows x " + std::to_string(h.row_dim()) +
                           " floats need " + std::to_string(row_bytes));
    msg.payload = frames[2];
  }
  return Status::OK();
}

// The payload size of a compressed push (kernels/compressor.h has the layouts), after checking that
// the header allows one.
StatusOr<uint64_t> compressedBytes(const pb::DataHeader& h, DType dtype, const Limits& limits) {
  if (!pb::PayloadEncoding_IsValid(h.encoding()))
    return ProtocolError("payload encoding " + std::to_string(h.encoding()) + " is unknown");
  if (dtype != DType::kFloat32)
    return ProtocolError("a compressed payload needs a float32 key, not " + std::string(dtypeName(dtype)));
  if (h.encoding() == pb::ENCODING_FP16) {
    if (h.sparse_count() != 0) return ProtocolError("sparse_count is set on an fp16 payload");
    return h.num_elements() * sizeof(uint16_t);  // below the dense size, which the caller capped
  }
  if (h.sparse_count() == 0 || h.sparse_count() > h.num_elements())
    return ProtocolError("sparse_count " + std::to_string(h.sparse_count()) + " is out of range [1, " +
                         std::to_string(h.num_elements()) + "]");
  const uint64_t bytes = h.sparse_count() * (sizeof(uint32_t) + sizeof(float));  // <= 2 x the capped dense size
  if (bytes > limits.max_payload_bytes)
    return ProtocolError("sparse payload of " + std::to_string(h.sparse_count()) +
                         " entries exceeds the payload limit");
  return bytes;
}

// Sparse indices must increase strictly and stay below the key's element count: a decoder may then
// write dst[index] without checks, and no element is counted twice.
Status checkSparseIndices(const Blob& payload, uint64_t count, uint64_t num_elements) {
  uint64_t next = 0;  // the smallest index allowed at this position
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t index;
    std::memcpy(&index, payload.data() + i * sizeof(index), sizeof(index));
    if (index < next || index >= num_elements)
      return ProtocolError("sparse index " + std::to_string(index) + " at position " + std::to_string(i) +
                           (index >= num_elements ? " is not below " + std::to_string(num_elements) + " elements"
                                                  : " does not increase"));
    next = uint64_t{index} + 1;
  }
  return Status::OK();
}

// The fields every data header must get right: command, mode, dtype (into msg.dtype), text lengths.
Status checkHeader(DataMessage& msg, const Limits& limits) {
  const auto& h = msg.header;
  if (!pb::DataCommand_IsValid(h.command()) || h.command() == pb::CMD_UNSPECIFIED)
    return ProtocolError("data command " + std::to_string(h.command()) + " is unknown");
  if (!pb::KeyMode_IsValid(h.mode())) return ProtocolError("key mode " + std::to_string(h.mode()) + " is unknown");
  auto dtype = dtypeFromInt(h.dtype());
  if (!dtype) return ProtocolError("dtype " + std::to_string(h.dtype()) + " is unknown");
  msg.dtype = *dtype;
  ZPS_RETURN_IF_ERROR(checkString("data.name", h.name(), limits));
  ZPS_RETURN_IF_ERROR(checkString("data.error", h.error(), limits));
  ZPS_RETURN_IF_ERROR(checkString("data.auth_nonce", h.auth_nonce(), limits));
  ZPS_RETURN_IF_ERROR(checkString("data.auth_mac", h.auth_mac(), limits));
  if (h.entries_size() > 0 && h.command() != pb::CMD_FUSED)
    return ProtocolError(pb::DataCommand_Name(h.command()) + " must not carry fused entries");
  if (h.awaited_size() > 0 && h.command() != pb::CMD_REPLY)
    return ProtocolError(pb::DataCommand_Name(h.command()) + " must not name awaited rounds; only a push's REPLY does");
  if (h.awaited_size() > kMaxAwaitedRounds)
    return ProtocolError("reply names " + std::to_string(h.awaited_size()) + " awaited rounds, at most " +
                         std::to_string(kMaxAwaitedRounds));
  if (h.holds_credit() && h.command() != pb::CMD_PUSH)
    return ProtocolError(pb::DataCommand_Name(h.command()) + " must not hold push credit; only a PUSH does");
  return Status::OK();
}

// The payload size a (non-row) header announces: num_elements x dtype, or its compressed encoding's.
StatusOr<uint64_t> announcedBytes(const DataMessage& msg, const Limits& limits) {
  const auto& h = msg.header;
  uint64_t expected = 0;
  if (!checkedBytes(h.num_elements(), dtypeSize(msg.dtype), &expected) || expected > limits.max_payload_bytes)
    return ProtocolError("num_elements " + std::to_string(h.num_elements()) + " of " +
                         std::string(dtypeName(msg.dtype)) + " exceeds the payload limit of " +
                         std::to_string(limits.max_payload_bytes) + " bytes");
  if (h.encoding() != pb::ENCODING_DENSE) {
    if (!commandHasPayload(h.command()))
      return ProtocolError(pb::DataCommand_Name(h.command()) + " cannot carry a compressed payload; only pushes do");
    return compressedBytes(h, msg.dtype, limits);
  }
  if (h.sparse_count() != 0) return ProtocolError("sparse_count is set on a dense payload");
  return expected;
}

// Checks a (non-row) message's payload, if it has one, against the size its header announces.
Status checkPayload(const Blob* payload, DataMessage& msg, const Limits& limits) {
  const auto& h = msg.header;
  ZPS_ASSIGN_OR_RETURN(const uint64_t expected, announcedBytes(msg, limits));
  const bool needs_payload = commandHasPayload(h.command());
  if (payload != nullptr) {
    if (!needs_payload && h.command() != pb::CMD_REPLY)
      return ProtocolError(std::string(pb::DataCommand_Name(h.command())) + " must not carry a payload");
    if (payload->size() != expected)
      return ProtocolError("payload is " + std::to_string(payload->size()) + " bytes but " +
                           std::to_string(h.num_elements()) + " x " + std::string(dtypeName(msg.dtype)) +
                           (h.encoding() == pb::ENCODING_DENSE ? "" : " " + pb::PayloadEncoding_Name(h.encoding())) +
                           " needs " + std::to_string(expected));
    if (h.encoding() == pb::ENCODING_SPARSE)
      ZPS_RETURN_IF_ERROR(checkSparseIndices(*payload, h.sparse_count(), h.num_elements()));
    msg.payload = *payload;
  } else if (needs_payload) {
    return ProtocolError(std::string(pb::DataCommand_Name(h.command())) + " is missing its payload frame");
  }
  return Status::OK();
}

bool isFusableRequest(pb::DataCommand c) { return c == pb::CMD_PUSH || c == pb::CMD_PULL || c == pb::CMD_PUSH_PULL; }
bool isReply(pb::DataCommand c) { return c == pb::CMD_REPLY || c == pb::CMD_ERROR; }

// One fused entry: its header checked like a message's, its payload the next `announced` bytes of the
// frame (PUSH, PUSH_PULL, REPLY; none for PULL and ERROR), bounded by subtraction.
Status takeEntry(const Blob& frame, size_t* offset, DataMessage& entry, bool replies, const Limits& limits) {
  const auto& h = entry.header;
  if (h.command() == pb::CMD_FUSED || h.entries_size() > 0) return ProtocolError("fused entries do not nest");
  ZPS_RETURN_IF_ERROR(checkHeader(entry, limits));
  if (replies ? !isReply(h.command()) : !isFusableRequest(h.command()))
    return ProtocolError(pb::DataCommand_Name(h.command()) + " cannot be fused with " +
                         (replies ? "replies" : "requests (only PUSH, PULL and PUSH_PULL can)"));
  if (h.command() == pb::CMD_PULL || h.command() == pb::CMD_ERROR) return checkPayload(nullptr, entry, limits);
  ZPS_ASSIGN_OR_RETURN(const uint64_t announced, announcedBytes(entry, limits));
  if (announced > frame.size() - *offset)
    return ProtocolError("fused entry for key " + std::to_string(h.key()) + " needs " + std::to_string(announced) +
                         " payload bytes but only " + std::to_string(frame.size() - *offset) + " are left");
  const Blob slice(frame.owner(), frame.data() + *offset, static_cast<size_t>(announced));
  *offset += static_cast<size_t>(announced);
  return checkPayload(&slice, entry, limits);
}

// CMD_FUSED: [header with entries, payloads]. The entry count is capped before any entry is copied, all
// entries go one way (requests or replies), a request names each key once, and the entries' payloads
// fill the frame exactly.
Status validateFused(const std::vector<Blob>& frames, DataMessage& msg, const Limits& limits) {
  auto& h = msg.header;
  const size_t count = static_cast<size_t>(h.entries_size());
  if (count == 0 || count > limits.max_fused_entries)
    return ProtocolError("fused message has " + std::to_string(count) + " entries, allowed 1 to " +
                         std::to_string(limits.max_fused_entries));
  if (frames.size() > 2)
    return ProtocolError("CMD_FUSED has " + std::to_string(frames.size()) + " frames, at most 2 allowed");
  if (h.num_elements() != 0 || h.encoding() != pb::ENCODING_DENSE || h.sparse_count() != 0)
    return ProtocolError("a fused message's own header announces no payload; its entries do");
  const bool replies = isReply(h.entries(0).command());
  const Blob none;
  const Blob& frame = frames.size() == 2 ? frames[1] : none;
  std::vector<uint64_t> keys;
  msg.entries.resize(count);
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    DataMessage& entry = msg.entries[i];
    entry.header = h.entries(static_cast<int>(i));  // a copy: a refused message's header keeps its entries
    Status s = takeEntry(frame, &offset, entry, replies, limits);
    if (!s.ok()) return s.withContext("fused entry " + std::to_string(i));
    if (!replies) keys.push_back(entry.header.key());
  }
  if (offset != frame.size())
    return ProtocolError("fused payload frame is " + std::to_string(frame.size()) + " bytes but its entries take " +
                         std::to_string(offset));
  std::sort(keys.begin(), keys.end());
  if (auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end())
    return ProtocolError("key " + std::to_string(*twice) +
                         " appears twice in one fused message; each key may be fused once per message");
  h.clear_entries();
  return Status::OK();
}

Status validateData(const std::vector<Blob>& frames, DataMessage& msg, const Limits& limits) {
  ZPS_RETURN_IF_ERROR(checkHeader(msg, limits));
  const auto& h = msg.header;
  if (h.command() == pb::CMD_FUSED) return validateFused(frames, msg, limits);
  if (h.command() == pb::CMD_PUSH_ROWS || h.command() == pb::CMD_PULL_ROWS) {
    if (h.encoding() != pb::ENCODING_DENSE) return ProtocolError("row commands carry no compressed payload");
    return validateRows(frames, msg, limits);
  }
  ZPS_RETURN_IF_ERROR(announcedBytes(msg, limits).status());  // the size limit is named before the frame count
  if (frames.size() > 2)
    return ProtocolError(pb::DataCommand_Name(h.command()) + " has " + std::to_string(frames.size()) +
                         " frames, at most 2 allowed");
  return checkPayload(frames.size() == 2 ? &frames[1] : nullptr, msg, limits);
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

StatusOr<Message> decode(const std::vector<Blob>& frames, const Limits& limits, pb::DataHeader* rejected) {
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
  if (env.body_case() != pb::Envelope::kData) return ProtocolError("envelope has no (known) body");

  DataMessage msg;
  msg.header = std::move(*env.mutable_data());
  Status s = validateData(frames, msg, limits);
  if (!s.ok()) {
    if (rejected != nullptr) *rejected = std::move(msg.header);
    return s;
  }
  return Message(std::move(msg));
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

std::vector<Blob> encodeData(const pb::DataHeader& header, Blob payload) {
  pb::Envelope env;
  *env.mutable_data() = header;
  std::vector<Blob> frames;
  frames.reserve(2);
  frames.push_back(Blob::fromString(env.SerializeAsString()));
  if (payload.data() != nullptr) frames.push_back(std::move(payload));
  return frames;
}

std::vector<Blob> encodeRows(const pb::DataHeader& header, Blob keys, Blob rows) {
  std::vector<Blob> frames = encodeData(header);
  frames.push_back(std::move(keys));
  if (rows.data() != nullptr) frames.push_back(std::move(rows));
  return frames;
}

}  // namespace zps::wire
