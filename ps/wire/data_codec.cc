#include "ps/wire/data_codec.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

namespace zps::wire::detail {

Status checkString(const std::string& field, const std::string& value, const Limits& limits) {
  if (value.size() > limits.max_string_bytes)
    return ProtocolError(field + " is " + std::to_string(value.size()) + " bytes, over the limit of " +
                         std::to_string(limits.max_string_bytes));
  return Status::OK();
}

namespace {

// ENCODING_NONZERO's layout (proto/zps.proto; kernels/nonzero_encoding.h encodes and decodes it): a
// bitmap of ceil(n / 8) bytes, then one float32 per set bit.
uint64_t nonzeroBitmapBytes(uint64_t n) { return n / 8 + (n % 8 != 0); }

// The command's name in messages ("CMD_PULL must not carry a payload").
std::string nameOf(const DataMessage& msg) { return pb::DataCommand_Name(commandOf(msg.data)); }

StatusOr<DType> checkDtype(uint32_t value) {
  auto dtype = dtypeFromInt(value);
  if (!dtype) return ProtocolError("dtype " + std::to_string(value) + " is unknown");
  return *dtype;
}

// num_elements x dtype, capped by the payload limit.
StatusOr<uint64_t> denseBytes(uint64_t num_elements, DType dtype, const Limits& limits) {
  uint64_t bytes = 0;
  if (!checkedBytes(num_elements, dtypeSize(dtype), &bytes) || bytes > limits.max_payload_bytes)
    return ProtocolError("num_elements " + std::to_string(num_elements) + " of " + std::string(dtypeName(dtype)) +
                         " exceeds the payload limit of " + std::to_string(limits.max_payload_bytes) + " bytes");
  return bytes;
}

// Bodies without payload frames.
Status checkNoPayload(const std::vector<Blob>& frames, const DataMessage& msg) {
  if (frames.size() > 1) return ProtocolError(nameOf(msg) + " must not carry a payload");
  return Status::OK();
}

// A present payload must be exactly `expected` bytes.
Status checkPayloadSize(const Blob& payload, uint64_t expected, uint64_t num_elements, DType dtype,
                        pb::PayloadEncoding encoding) {
  if (payload.size() == expected) return Status::OK();
  return ProtocolError("payload is " + std::to_string(payload.size()) + " bytes but " + std::to_string(num_elements) +
                       " x " + std::string(dtypeName(dtype)) +
                       (encoding == pb::ENCODING_DENSE ? "" : " " + pb::PayloadEncoding_Name(encoding)) + " needs " +
                       std::to_string(expected));
}

// The payload size of an encoded payload (kernels/compressor.h and kernels/nonzero_encoding.h have
// the layouts) of num_elements x dtype, whose dense size the caller capped.
StatusOr<uint64_t> encodedBytes(pb::PayloadEncoding encoding, uint64_t sparse_count, uint64_t num_elements, DType dtype,
                                const Limits& limits) {
  if (!pb::PayloadEncoding_IsValid(encoding))
    return ProtocolError("payload encoding " + std::to_string(encoding) + " is unknown");
  if (dtype != DType::kFloat32)
    return ProtocolError("an encoded payload needs a float32 key, not " + std::string(dtypeName(dtype)));
  if (encoding == pb::ENCODING_FP16) {
    if (sparse_count != 0) return ProtocolError("sparse_count is set on an fp16 payload");
    return num_elements * sizeof(uint16_t);  // below the dense size, which the caller capped
  }
  if (encoding == pb::ENCODING_NONZERO) {
    if (sparse_count > num_elements)
      return ProtocolError("sparse_count " + std::to_string(sparse_count) +
                           " of a nonzero payload is out of range [0, " + std::to_string(num_elements) + "]");
    return nonzeroBitmapBytes(num_elements) + sparse_count * sizeof(float);  // at most 1/8 over the capped dense size
  }
  if (sparse_count == 0 || sparse_count > num_elements)
    return ProtocolError("sparse_count " + std::to_string(sparse_count) + " is out of range [1, " +
                         std::to_string(num_elements) + "]");
  const uint64_t bytes = sparse_count * (sizeof(uint32_t) + sizeof(float));  // <= 2 x the capped dense size
  if (bytes > limits.max_payload_bytes)
    return ProtocolError("sparse payload of " + std::to_string(sparse_count) + " entries exceeds the payload limit");
  return bytes;
}

// A nonzero payload's bitmap sets exactly sparse_count bits, none at num_elements or past it: a decoder
// may then read one value per set bit without checks.
Status checkNonzeroBitmap(const Blob& payload, uint64_t count, uint64_t num_elements) {
  const uint64_t bytes = nonzeroBitmapBytes(num_elements);
  uint64_t set = 0;
  for (uint64_t b = 0; b < bytes; ++b) set += static_cast<uint64_t>(std::popcount(payload.data()[b]));
  if (set != count)
    return ProtocolError("nonzero bitmap sets " + std::to_string(set) + " bits but sparse_count is " +
                         std::to_string(count));
  if (num_elements % 8 != 0 && (payload.data()[bytes - 1] >> (num_elements % 8)) != 0)
    return ProtocolError("nonzero bitmap sets bits past its " + std::to_string(num_elements) + " elements");
  return Status::OK();
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

bool isPush(pb::TensorOp op) { return op == pb::OP_PUSH || op == pb::OP_PUSH_PULL; }

// The payload bytes a Tensor announces: num_elements x dtype, or its compressed encoding's.
StatusOr<uint64_t> tensorBytes(const pb::Tensor& t, const DataMessage& msg, const Limits& limits) {
  ZPS_ASSIGN_OR_RETURN(const uint64_t dense, denseBytes(t.num_elements(), msg.dtype, limits));
  if (t.encoding() != pb::ENCODING_DENSE) {
    if (!isPush(t.op())) return ProtocolError(nameOf(msg) + " cannot carry an encoded payload; only pushes do");
    return encodedBytes(t.encoding(), t.sparse_count(), t.num_elements(), msg.dtype, limits);
  }
  if (t.sparse_count() != 0) return ProtocolError("sparse_count is set on a dense payload");
  return dense;
}

// A push, pull or push-pull; `payload` is its frame or its slice of a fused frame (null: none).
Status checkTensor(const pb::Tensor& t, const Blob* payload, const Limits& limits, DataMessage& msg) {
  if (!pb::TensorOp_IsValid(t.op()) || t.op() == pb::OP_UNSPECIFIED)
    return ProtocolError("tensor op " + std::to_string(t.op()) + " is unknown");
  ZPS_ASSIGN_OR_RETURN(msg.dtype, checkDtype(t.dtype()));
  if (t.holds_credit() && t.op() != pb::OP_PUSH)
    return ProtocolError(nameOf(msg) + " must not hold push credit; only a PUSH does");
  ZPS_ASSIGN_OR_RETURN(const uint64_t expected, tensorBytes(t, msg, limits));
  if (payload == nullptr) {
    if (isPush(t.op())) return ProtocolError(nameOf(msg) + " is missing its payload frame");
    return Status::OK();
  }
  if (!isPush(t.op())) return ProtocolError(nameOf(msg) + " must not carry a payload");
  ZPS_RETURN_IF_ERROR(checkPayloadSize(*payload, expected, t.num_elements(), msg.dtype, t.encoding()));
  if (t.encoding() == pb::ENCODING_SPARSE)
    ZPS_RETURN_IF_ERROR(checkSparseIndices(*payload, t.sparse_count(), t.num_elements()));
  if (t.encoding() == pb::ENCODING_NONZERO)
    ZPS_RETURN_IF_ERROR(checkNonzeroBitmap(*payload, t.sparse_count(), t.num_elements()));
  msg.payload = *payload;
  return Status::OK();
}

// The payload bytes a Reply announces: num_elements x dtype, or its nonzero encoding's.
StatusOr<uint64_t> replyBytes(const pb::Reply& r, DType dtype, const Limits& limits) {
  ZPS_ASSIGN_OR_RETURN(const uint64_t dense, denseBytes(r.num_elements(), dtype, limits));
  if (r.encoding() == pb::ENCODING_DENSE) {
    if (r.sparse_count() != 0) return ProtocolError("sparse_count is set on a dense reply");
    return dense;
  }
  if (r.encoding() != pb::ENCODING_NONZERO)
    return ProtocolError("a reply's payload encoding must be dense or nonzero, not " + std::to_string(r.encoding()));
  return encodedBytes(r.encoding(), r.sparse_count(), r.num_elements(), dtype, limits);
}

// An answer: its payload, if any, is num_elements x dtype, or their nonzero encoding.
Status checkReply(const pb::Reply& r, const Blob* payload, const Limits& limits, DataMessage& msg) {
  ZPS_ASSIGN_OR_RETURN(msg.dtype, checkDtype(r.dtype()));
  if (r.awaited_size() > kMaxAwaitedRounds)
    return ProtocolError("reply names " + std::to_string(r.awaited_size()) + " awaited rounds, at most " +
                         std::to_string(kMaxAwaitedRounds));
  ZPS_ASSIGN_OR_RETURN(const uint64_t expected, replyBytes(r, msg.dtype, limits));
  if (payload == nullptr) {
    if (r.encoding() != pb::ENCODING_DENSE) return ProtocolError("a nonzero-encoded reply is missing its payload");
    return Status::OK();
  }
  ZPS_RETURN_IF_ERROR(checkPayloadSize(*payload, expected, r.num_elements(), msg.dtype, r.encoding()));
  if (r.encoding() == pb::ENCODING_NONZERO)
    ZPS_RETURN_IF_ERROR(checkNonzeroBitmap(*payload, r.sparse_count(), r.num_elements()));
  msg.payload = *payload;
  return Status::OK();
}

Status checkError(const pb::Error& e, const Limits& limits) { return checkString("error.text", e.text(), limits); }

Status checkHello(const pb::Hello& h, const Limits& limits) {
  ZPS_RETURN_IF_ERROR(checkString("hello.auth_nonce", h.auth_nonce(), limits));
  return checkString("hello.auth_mac", h.auth_mac(), limits);
}

Status checkHelloReply(const pb::HelloReply& r, const Limits& limits) {
  ZPS_RETURN_IF_ERROR(checkString("hello_reply.auth_mac", r.auth_mac(), limits));
  return checkString("hello_reply.ipc_name", r.ipc_name(), limits);
}

Status checkDeclare(const pb::Declare& d, const Limits& limits, DataMessage& msg) {
  if (!pb::KeyMode_IsValid(d.mode())) return ProtocolError("key mode " + std::to_string(d.mode()) + " is unknown");
  ZPS_ASSIGN_OR_RETURN(msg.dtype, checkDtype(d.dtype()));
  ZPS_RETURN_IF_ERROR(checkString("declare.name", d.name(), limits));
  return denseBytes(d.num_elements(), msg.dtype, limits).status();
}

// Rows: [envelope, keys] for a pull, [envelope, keys, rows] for a push. Rows are float32.
Status checkRows(const pb::Rows& r, const std::vector<Blob>& frames, const Limits& limits, DataMessage& msg) {
  const size_t want_frames = r.push() ? 3 : 2;
  if (frames.size() != want_frames)
    return ProtocolError(nameOf(msg) + " needs " + std::to_string(want_frames) + " frames, got " +
                         std::to_string(frames.size()));
  if (r.row_dim() == 0 || r.row_dim() > limits.max_row_dim)
    return ProtocolError("row_dim " + std::to_string(r.row_dim()) + " is out of range [1, " +
                         std::to_string(limits.max_row_dim) + "]");
  uint64_t key_bytes = 0, row_floats = 0, row_bytes = 0;
  if (!checkedBytes(r.count(), sizeof(uint64_t), &key_bytes) || key_bytes > limits.max_payload_bytes ||
      !checkedBytes(r.count(), r.row_dim(), &row_floats) || !checkedBytes(row_floats, 4, &row_bytes) ||
      row_bytes > limits.max_payload_bytes)
    return ProtocolError(std::to_string(r.count()) + " rows of " + std::to_string(r.row_dim()) +
                         " floats exceed the payload limit");
  if (frames[1].size() != key_bytes)
    return ProtocolError("keys frame is " + std::to_string(frames[1].size()) + " bytes but " +
                         std::to_string(r.count()) + " keys need " + std::to_string(key_bytes));
  msg.dtype = DType::kFloat32;
  msg.keys = frames[1];
  if (!r.push()) return Status::OK();
  if (frames[2].size() != row_bytes)
    return ProtocolError("rows frame is " + std::to_string(frames[2].size()) + " bytes but " +
                         std::to_string(r.count()) + " rows x " + std::to_string(r.row_dim()) + " floats need " +
                         std::to_string(row_bytes));
  msg.payload = frames[2];
  return Status::OK();
}

bool isReplyBody(pb::Data::BodyCase c) { return c == pb::Data::kReply || c == pb::Data::kError; }

// One fused entry: a Tensor request or a Reply / Error answer, its payload the next bytes of the frame
// (none for a pull and an error), bounded by subtraction.
Status takeEntry(const pb::Data& d, const Blob& frame, size_t* offset, bool replies, const Limits& limits,
                 DataMessage& entry) {
  if (d.body_case() == pb::Data::kFused) return ProtocolError("fused entries do not nest");
  if (d.protocol_version() != 0)
    return ProtocolError("a fused entry names protocol version " + std::to_string(d.protocol_version()) +
                         "; entries take the fused message's");
  if (replies ? !isReplyBody(d.body_case()) : d.body_case() != pb::Data::kTensor)
    return ProtocolError(nameOf(entry) + " cannot be fused with " +
                         (replies ? "replies" : "requests (only PUSH, PULL and PUSH_PULL can)"));
  if (d.has_error()) return checkError(d.error(), limits);
  uint64_t announced = 0;
  if (d.has_tensor()) {
    if (!pb::TensorOp_IsValid(d.tensor().op()) || d.tensor().op() == pb::OP_UNSPECIFIED)
      return ProtocolError("tensor op " + std::to_string(d.tensor().op()) + " is unknown");
    ZPS_ASSIGN_OR_RETURN(entry.dtype, checkDtype(d.tensor().dtype()));
    if (d.tensor().op() == pb::OP_PULL) return checkTensor(d.tensor(), nullptr, limits, entry);
    ZPS_ASSIGN_OR_RETURN(announced, tensorBytes(d.tensor(), entry, limits));
  } else {
    ZPS_ASSIGN_OR_RETURN(entry.dtype, checkDtype(d.reply().dtype()));
    ZPS_ASSIGN_OR_RETURN(announced, replyBytes(d.reply(), entry.dtype, limits));
  }
  if (announced > frame.size() - *offset)
    return ProtocolError("fused entry for key " + std::to_string(keyOf(entry.data)) + " needs " +
                         std::to_string(announced) + " payload bytes but only " +
                         std::to_string(frame.size() - *offset) + " are left");
  const Blob slice(frame.owner(), frame.data() + *offset, static_cast<size_t>(announced));
  *offset += static_cast<size_t>(announced);
  return d.has_tensor() ? checkTensor(d.tensor(), &slice, limits, entry) : checkReply(d.reply(), &slice, limits, entry);
}

// Fused: [envelope, payloads]. The entry count is capped before any entry is translated, all entries
// go one way (requests or replies), a request names each key once, and the entries' payloads fill the
// frame exactly.
Status checkFused(const pb::Fused& f, const std::vector<Blob>& frames, const Limits& limits, DataMessage& msg) {
  const size_t count = static_cast<size_t>(f.entries_size());
  if (count == 0 || count > limits.max_fused_entries)
    return ProtocolError("fused message has " + std::to_string(count) + " entries, allowed 1 to " +
                         std::to_string(limits.max_fused_entries));
  if (frames.size() > 2)
    return ProtocolError("CMD_FUSED has " + std::to_string(frames.size()) + " frames, at most 2 allowed");
  const bool replies = isReplyBody(f.entries(0).body_case());
  const Blob none;
  const Blob& frame = frames.size() == 2 ? frames[1] : none;
  std::vector<uint64_t> keys;
  msg.entries.resize(count);
  size_t offset = 0;
  for (size_t i = 0; i < count; ++i) {
    DataMessage& entry = msg.entries[i];
    entry.data = f.entries(static_cast<int>(i));
    Status s = takeEntry(f.entries(static_cast<int>(i)), frame, &offset, replies, limits, entry);
    if (!s.ok()) return s.withContext("fused entry " + std::to_string(i));
    if (!replies) keys.push_back(keyOf(entry.data));
  }
  if (offset != frame.size())
    return ProtocolError("fused payload frame is " + std::to_string(frame.size()) + " bytes but its entries take " +
                         std::to_string(offset));
  std::sort(keys.begin(), keys.end());
  if (auto twice = std::adjacent_find(keys.begin(), keys.end()); twice != keys.end())
    return ProtocolError("key " + std::to_string(*twice) +
                         " appears twice in one fused message; each key may be fused once per message");
  msg.data.mutable_fused()->clear_entries();
  return Status::OK();
}

// The body's own check; frames[0] is the envelope.
Status checkBody(const pb::Data& d, const std::vector<Blob>& frames, const Limits& limits, DataMessage& msg) {
  const Blob* payload = frames.size() == 2 ? &frames[1] : nullptr;
  switch (d.body_case()) {
    case pb::Data::kHello: ZPS_RETURN_IF_ERROR(checkNoPayload(frames, msg)); return checkHello(d.hello(), limits);
    case pb::Data::kHelloReply:
      ZPS_RETURN_IF_ERROR(checkNoPayload(frames, msg));
      return checkHelloReply(d.hello_reply(), limits);
    case pb::Data::kDeclare:
      ZPS_RETURN_IF_ERROR(checkDeclare(d.declare(), limits, msg));  // the size limit is named before the frames
      return checkNoPayload(frames, msg);
    case pb::Data::kTensor:
      // The size limit is named before the frame count.
      if (pb::TensorOp_IsValid(d.tensor().op()) && d.tensor().op() != pb::OP_UNSPECIFIED) {
        ZPS_ASSIGN_OR_RETURN(msg.dtype, checkDtype(d.tensor().dtype()));
        ZPS_RETURN_IF_ERROR(tensorBytes(d.tensor(), msg, limits).status());
      }
      if (frames.size() > 2)
        return ProtocolError(nameOf(msg) + " has " + std::to_string(frames.size()) + " frames, at most 2 allowed");
      return checkTensor(d.tensor(), payload, limits, msg);
    case pb::Data::kRows: return checkRows(d.rows(), frames, limits, msg);
    case pb::Data::kCheckpoint:
    case pb::Data::kStats:
    case pb::Data::kStatsReply: return checkNoPayload(frames, msg);
    case pb::Data::kReply:
      if (frames.size() > 2)
        return ProtocolError(nameOf(msg) + " has " + std::to_string(frames.size()) + " frames, at most 2 allowed");
      return checkReply(d.reply(), payload, limits, msg);
    case pb::Data::kError: ZPS_RETURN_IF_ERROR(checkNoPayload(frames, msg)); return checkError(d.error(), limits);
    case pb::Data::kFused: return checkFused(d.fused(), frames, limits, msg);
    case pb::Data::BODY_NOT_SET: break;
  }
  return ProtocolError("data message has no (known) body");
}

}  // namespace

Status decodeData(pb::Data received, const std::vector<Blob>& frames, const Limits& limits, DataMessage& msg) {
  msg.data = std::move(received);
  const pb::Data& data = msg.data;
  // A HELLO's version is the server's to refuse, in an answer the peer prints (server/server.cc).
  if (!data.has_hello() && data.protocol_version() != kProtocolVersion)
    return ProtocolError("the peer speaks zps protocol version " + std::to_string(data.protocol_version()) +
                         ", this node version " + std::to_string(kProtocolVersion));
  return checkBody(data, frames, limits, msg);
}

}  // namespace zps::wire::detail
