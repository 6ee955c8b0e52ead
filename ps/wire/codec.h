// The codec: the ONLY parser of bytes that come from peers. A received message (a list of frames) leaves
// decode() either as a validated Message or as a kProtocol Status saying what was wrong. Every size is
// capped before anything is allocated, every enum and count is range-checked, and payload sizes must equal
// num_elements * dtype size exactly (overflow-checked). The codec never touches sockets.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/blob.h"
#include "zps/dtype.h"
#include "zps/status.h"

namespace zps::wire {

inline constexpr uint32_t kMagic = 0x5A505331;  // "ZPS1"
// 2: one message per command (pb::Data's bodies); 1 had one flat header for every command and is
// refused (version1Refusal).
inline constexpr uint32_t kProtocolVersion = 2;
// Async pushes (Tensor.push_seq, Rows.push_seq): a worker keeps every unanswered push of a key within this many
// numbers of its oldest unanswered one, and a server remembers this many numbers per (pusher, key).
inline constexpr uint64_t kAsyncPushWindow = 64;
// CMD_FUSED: the most entries one fused message may carry (a worker fuses at most this many).
inline constexpr size_t kMaxFusedEntries = 1024;
// A heartbeat: the most tables it may carry (a server sends its largest this many and counts the rest).
// With names of at most max_string_bytes they fit max_envelope_bytes.
inline constexpr size_t kMaxHeartbeatTables = 128;
// A push's Reply: the most awaited rounds it may name (Reply.awaited; a server names at most this many).
inline constexpr int kMaxAwaitedRounds = 16;

struct Limits {
  size_t max_frames = 3;                // envelope + at most two payload frames (keys + rows)
  size_t max_envelope_bytes = 1 << 20;  // an address book of thousands of nodes still fits
  size_t max_payload_bytes = size_t{1} << 30;
  size_t max_string_bytes = 4096;  // names, hosts, error texts
  size_t max_address_book = 65536;
  uint32_t max_row_dim = 65536;
  size_t max_fused_entries = kMaxFusedEntries;
  size_t max_heartbeat_tables = kMaxHeartbeatTables;
};

// A validated data-plane message: its Data (request id, generation and one body) and what its frames
// carry. dtype is already range-checked; payload sizes already match. Rows carry `count` keys in `keys`
// (uint64, possibly unaligned: read them with keyAt) and, for a push, count x row_dim float32 values in
// `payload`. A compressed push (Tensor.encoding, float32 keys only) has the payload size of its
// encoding, and a sparse one has sparse_count in [1, num_elements] and indices that increase strictly
// below num_elements. Fused: `entries` holds one validated message per fused request (Tensor: push,
// pull or push-pull, no key twice) or answer (Reply, Error), each with its slice of the payload frame
// (which the entries fill exactly); the outer message itself has no payload, and its body's entries
// are moved into `entries`.
struct DataMessage {
  pb::Data data;  // the validated envelope and body (Fused: its entries moved to `entries`)
  DType dtype = DType::kFloat32;
  Blob keys;                         // row commands only
  Blob payload;                      // empty for commands without one
  std::vector<DataMessage> entries;  // CMD_FUSED only

  uint64_t keyAt(size_t i) const;
};

using Message = std::variant<pb::Control, DataMessage>;

// Decodes and validates a received message. When a data message's envelope parses but the message is
// invalid, *rejected (if given) receives its Data as received, so that a server can address an error
// reply to a known peer (a Fused one's entries only when there are at most Limits::max_fused_entries).
// A data message of protocol version 1 is refused with version1Refusal(), and *rejected then has
// protocol_version 1, its request id and, for its HELLO, an empty Hello body (the server answers it with
// encodeVersion1Error).
StatusOr<Message> decode(const std::vector<Blob>& frames, const Limits& limits, pb::Data* rejected = nullptr);

// Encoders build frames for a (validated, our own) message. The payload Blob is sent without copying.
std::vector<Blob> encodeControl(const pb::Control& control);
// A data message: its body and, for a push or an answer with data, the payload (a Fused message: the
// entries' payloads back to back). protocol_version 0 is sent as kProtocolVersion (a test may set
// another).
std::vector<Blob> encodeData(pb::Data data, Blob payload = Blob());
// Rows: the body, the keys frame and (a push) the rows frame.
std::vector<Blob> encodeRows(pb::Data data, Blob keys, Blob rows = Blob());
// A Data sent exactly as given, its protocol version included (a worker fusing requests it has
// encoded already; tests of refusals).
std::vector<Blob> encodeBody(pb::Data data, Blob payload = Blob());

// What a body is, by the command names of log lines and refusals (CMD_PUSH_PULL, CMD_REPLY for every
// answer but an Error, CMD_UNSPECIFIED without a body).
pb::DataCommand commandOf(const pb::Data& data);
// The key and round a body names (a Checkpoint's step as its round); 0 for bodies without one.
uint64_t keyOf(const pb::Data& data);
uint64_t roundOf(const pb::Data& data);

// What a node says to a peer of protocol version 1, naming both versions.
std::string version1Refusal();
// An ERROR in version 1's framing, which such a peer decodes and prints.
std::vector<Blob> encodeVersion1Error(uint64_t request_id, const std::string& error);

// The Tensor op of CMD_PUSH, CMD_PULL or CMD_PUSH_PULL (OP_UNSPECIFIED for any other command).
pb::TensorOp tensorOp(pb::DataCommand command);

// Checked num_elements * element size; false on overflow.
bool checkedBytes(uint64_t num_elements, size_t element_size, uint64_t* bytes);

const char* roleName(pb::Role role);

}  // namespace zps::wire
