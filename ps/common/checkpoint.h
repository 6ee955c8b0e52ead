// Checkpoint files: one self-checking file per shard, which records the job shape it belongs to.
// Format (little-endian), version 2:
//   8 bytes  magic "ZPSCKPT1"
//   4 bytes  format version (2)
//   4 bytes  kind (what the payload is: 1 = dense model, 2 = param table shard, 3 = param table
//            increment: the rows changed since an earlier shard, server/table_checkpoint.h)
//   8 bytes  step (the training step the state belongs to)
//   4 bytes  server rank of the writer (0xFFFFFFFF: no server, the dense model)
//   4 bytes  number of servers of the job that wrote it
//   8 bytes  job id (the checkpoint folder's, checkpoint_dir.h)
//   4 bytes  table name length (at most kMaxCheckpointTableName), then the name (empty: dense model)
//   8 bytes  payload length
//   4 bytes  CRC-32 (IEEE) of the payload
//   4 bytes  CRC-32 of every header byte before this one
//   payload
// Writes are atomic: a temporary file in the same folder is written, fsynced, renamed over the target,
// and the folder is fsynced, so a crash leaves either the old file or the new one. A reader never returns
// a file whose magic, version, length or CRC is wrong, nor one whose shape differs from the one it
// expects: it says which check failed, naming the file. Everything it reads is bounded before it
// allocates (the file is hostile input: tests/fuzz/checkpoint_fuzzer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zps/status.h"

namespace zps {

enum class CheckpointKind : uint32_t { kDenseModel = 1, kParamTable = 2, kParamTableIncrement = 3 };

constexpr uint32_t kNoServer = 0xFFFFFFFFu;
constexpr uint32_t kMaxCheckpointTableName = 4096;
constexpr uint32_t kMaxCheckpointServers = 1u << 16;

// The job shape a checkpoint file belongs to.
struct CheckpointShape {
  CheckpointKind kind = CheckpointKind::kDenseModel;
  uint64_t step = 0;
  uint32_t server_rank = kNoServer;
  uint32_t num_servers = 0;  // expected: 0 = any (a dense model, or a shard being re-sharded)
  std::string table;         // param shards: the table's name
  uint64_t job_id = 0;
  // "step 40, server 1 of 2, table 'emb', job 3f..": for messages.
  std::string describe() const;
};

struct CheckpointFile {
  CheckpointShape shape;
  std::string payload;
};

uint32_t crc32(const void* data, size_t size);

Status writeCheckpointFile(const std::string& path, const CheckpointShape& shape, const std::string& payload);
// Reads `path` and checks it against `expected`: kNotFound when it does not exist, kInvalidArgument
// naming the file and each field that differs (or the check that failed) otherwise. A payload longer
// than `max_payload_bytes` is refused before it is read.
StatusOr<CheckpointFile> readCheckpointFile(const std::string& path, const CheckpointShape& expected,
                                            uint64_t max_payload_bytes);
// Reads `path` with no expectations beyond a valid file (tools, the fuzzer).
StatusOr<CheckpointFile> readAnyCheckpointFile(const std::string& path, uint64_t max_payload_bytes);
// Reads only the header of `path` (checked as readAnyCheckpointFile checks it, the payload's CRC aside).
StatusOr<CheckpointShape> readCheckpointShape(const std::string& path);
// kInvalidArgument naming `path` and each field of `found` that differs from `expected`.
Status checkCheckpointShape(const std::string& path, const CheckpointShape& found, const CheckpointShape& expected);
// Writes a small text file atomically (the same temp + fsync + rename dance), e.g. the "latest" pointer.
Status writeFileAtomically(const std::string& path, const std::string& contents);

// Appends fixed-size values to / reads them from a payload, for the payload formats built on top.
class PayloadWriter {
 public:
  template <typename T>
  void put(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void putBytes(const void* p, size_t n) {
    if (n > 0) out_.append(static_cast<const char*>(p), n);  // p may be null when n is 0
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class PayloadReader {
 public:
  explicit PayloadReader(const std::string& in) : in_(in) {}
  template <typename T>
  bool get(T* v) {
    return getBytes(v, sizeof(T));
  }
  bool getBytes(void* p, size_t n);
  bool skip(size_t n);
  size_t remaining() const { return in_.size() - pos_; }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace zps
