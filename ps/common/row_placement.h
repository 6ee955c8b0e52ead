// Which server holds a table row: the one rule the workers (worker/tables.cc, to route pulls and
// pushes) and the servers (server/table_checkpoint.cc, to re-shard a checkpoint written by a job
// with another number of servers) must agree on.
#pragma once

#include <cstdint>

namespace zps {

inline int serverOfRow(uint64_t key, int num_servers) {
  // Row keys are often small consecutive ids or hashes; mix them so rows spread evenly over servers.
  uint64_t x = key * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  return static_cast<int>(x % static_cast<uint64_t>(num_servers));
}

}  // namespace zps
