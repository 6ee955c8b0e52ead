// Checkpoint files: one self-checking file per shard. Format (little-endian):
//   8 bytes  magic "ZPSCKPT1"
//   4 bytes  format version (1)
//   4 bytes  kind (what the payload is: 1 = dense model, 2 = param table shard)
//   8 bytes  step (the training step the state belongs to)
//   8 bytes  payload length
//   4 bytes  CRC-32 (IEEE) of the payload
//   payload
// Writes are atomic: a temporary file in the same folder is written, fsynced, renamed over the target,
// and the folder is fsynced, so a crash leaves either the old file or the new one. A reader never returns
// a file whose magic, version, length or CRC is wrong: it says which check failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zps/status.h"

namespace zps {

enum class CheckpointKind : uint32_t { kDenseModel = 1, kParamTable = 2 };

struct CheckpointFile {
  CheckpointKind kind;
  uint64_t step = 0;
  std::string payload;
};

uint32_t crc32(const void* data, size_t size);

Status writeCheckpointFile(const std::string& path, CheckpointKind kind, uint64_t step, const std::string& payload);
StatusOr<CheckpointFile> readCheckpointFile(const std::string& path, CheckpointKind expected_kind);
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
  size_t remaining() const { return in_.size() - pos_; }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace zps
