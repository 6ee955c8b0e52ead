// Writes checkpoint files in format version 1, as zps wrote them before version 2
// (ps/common/checkpoint_v1.h has the layout), for the tests of reading and upgrading them.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "ps/common/checkpoint.h"

namespace zps::testing {

inline std::string version1Bytes(CheckpointKind kind, uint64_t step, const std::string& payload) {
  PayloadWriter w;
  w.putBytes("ZPSCKPT1", 8);
  w.put(uint32_t{1});
  w.put(static_cast<uint32_t>(kind));
  w.put(step);
  w.put(static_cast<uint64_t>(payload.size()));
  w.put(crc32(payload.data(), payload.size()));
  return w.take() + payload;
}

inline bool writeVersion1File(const std::string& path, CheckpointKind kind, uint64_t step, const std::string& payload) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << version1Bytes(kind, step, payload);
  return static_cast<bool>(out);
}

}  // namespace zps::testing
