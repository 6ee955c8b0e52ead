// Version 1 of the checkpoint file format (ps/common/checkpoint.h has version 2), read only to
// convert old folders (`zps checkpoint upgrade`, tools/checkpoint_upgrade.cc). Plain functions.
// Format (little-endian):
//   8 bytes  magic "ZPSCKPT1"
//   4 bytes  format version (1)
//   4 bytes  kind (1 = dense model, 2 = param table shard)
//   8 bytes  step
//   8 bytes  payload length
//   4 bytes  CRC-32 (IEEE) of the payload
//   payload  (the same payloads as version 2)
// A version 1 file records no server rank, number of servers, table name or job id: a table shard's
// server and step are in its file name (table-<key>-server-<r>-step-<s>.ckpt, <key> the table's key),
// its table's name is at the start of its payload.
#pragma once

#include <cstdint>
#include <string>

#include "ps/common/checkpoint.h"
#include "zps/status.h"

namespace zps {

// Reads a version 1 file: its kind and step (the other shape fields are left at their defaults) and
// its payload, checked as version 2 files are (regular file, magic, version, kind, length, CRC).
// kNotFound when it does not exist, kInvalidArgument naming the file otherwise.
StatusOr<CheckpointFile> readVersion1CheckpointFile(const std::string& path);
// The format version of the file at `path` (the 4 bytes after the magic), or kInvalidArgument
// naming it when it is no zps checkpoint.
StatusOr<uint32_t> checkpointFormatVersion(const std::string& path);

}  // namespace zps
