// A server's table shards in the checkpoint folder: file names, the payload format, retention, and
// re-sharding on restore. Plain functions, called by ParamStore on its engine thread.
//
// File: table-<name>-<crc>-server-<r>-step-<s>.ckpt, where <name> is the table's name with every
// character other than [A-Za-z0-9_.] replaced by '_' (at most 64 of them) and <crc> the CRC-32 of
// the full name in hex. The name, not the table's key, identifies the table: the key depends on the
// tensors declared before it (ZPS_RECOVERY declares two more), the name does not. The header
// (ps/common/checkpoint.h) records step, server rank, number of servers, table name and job id.
//
// Payload: name length + name, dim, optimizer kind, state floats, row count, then per row: key,
// updates applied, dim values, state_floats x dim optimizer state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zps/status.h"

namespace zps {

// Where a server writes its shards and the job shape they record.
struct ShardPlace {
  std::string dir;  // empty: no checkpoints
  uint32_t server_rank = 0;
  uint32_t num_servers = 1;
  uint64_t job_id = 0;
};

struct TableLayout {
  std::string name;
  uint32_t dim = 0;
  uint32_t optimizer_kind = 0;
  uint32_t state_floats = 0;
};

// A table's rows in slot order, as ParamStore holds them: read-only references (writing) ...
struct TableRowsRef {
  const std::vector<uint64_t>& keys;
  const std::vector<uint64_t>& steps;  // updates applied to each row
  const std::vector<float>& values;    // keys.size() x dim
  const std::vector<float>& state;     // keys.size() x state_floats x dim
};

// ... and the rows themselves (restoring).
struct TableRows {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> steps;
  std::vector<float> values;
  std::vector<float> state;
  TableRowsRef ref() const { return {keys, steps, values, state}; }
};

std::string tableShardPath(const std::string& dir, const std::string& table, uint32_t server_rank, uint64_t step);

// A sum over rows of a hash of (key, updates, values, state): the same for a table however its
// rows are split over servers or ordered, so the shards' sums before and after a re-shard agree.
uint64_t tableRowsChecksum(const TableLayout& layout, const TableRowsRef& rows);

// Writes this server's shard of the table at `step`, then removes the table's shards (of any server)
// older than `committed`, the newest step the caller knows `latest` to name (or a newer one; 0:
// none known, nothing is removed). The server cannot read `latest` itself: with a folder per pod
// (k8s/overlays/recovery) only worker 0's folder has one.
Status writeTableShard(const ShardPlace& place, const TableLayout& layout, const TableRowsRef& rows, uint64_t step,
                       uint64_t committed);

struct ShardRestore {
  uint32_t old_servers = 0;  // servers of the job that wrote the checkpoint
  uint32_t shards_read = 0;
  uint64_t rows_skipped = 0;       // rows of the shards read that other servers own now
  std::vector<std::string> files;  // the shards read, for messages
};

// Reads the table as checkpointed at `step` into `rows`, keeping the rows this server owns
// (serverOfRow with place.num_servers). The number of servers that wrote it comes from server 0's
// shard; with the same number, this server reads only its own shard, otherwise every old shard
// (re-sharding). Every shard's header must match (step, rank, servers, table, job id) and its
// layout the declared one. `reserve(n)` is asked before n more rows are kept (the memory budget);
// no shard larger than max_shard_bytes is read.
StatusOr<ShardRestore> readTableShards(const ShardPlace& place, const TableLayout& layout, uint64_t step,
                                       uint64_t max_shard_bytes, const std::function<Status(uint64_t)>& reserve,
                                       TableRows* rows);

}  // namespace zps
