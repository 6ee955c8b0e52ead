// A server's table shards in the checkpoint folder: file names, the payload format, retention, and
// re-sharding on restore. Plain functions, called by ParamStore on its engine thread.
//
// File: table-<name>-<crc>-server-<r>-step-<s>.ckpt, where <name> is the table's name with every
// character other than [A-Za-z0-9_.] replaced by '_' (at most 64 of them) and <crc> the CRC-32 of
// the full name in hex. The name, not the table's key, identifies the table: the key depends on the
// tensors declared before it (ZPS_RECOVERY declares two more), the name does not. The header
// (ps/common/checkpoint.h) records step, server rank, number of servers, table name and job id.
//
// Payload of a full shard (kind kParamTable): name length + name, dim, optimizer kind, state floats,
// row count, then per row: key, updates applied, dim values, state_floats x dim optimizer state.
//
// Incremental checkpoints (ZPS_TABLE_CHECKPOINT_INCREMENTS=N): up to N checkpoints in a row after a
// full one are increments (kind kParamTableIncrement), under the same file name: the rows that
// changed since this server's previous checkpoint, and the keys of the rows that checkpoint held and
// the server has evicted since. Payload: name length + name, dim, optimizer kind, state floats, the
// previous checkpoint's step, removed count, removed keys, row count, rows as above. A shard at a
// step is its chain applied in order: the full shard, then each increment's removals and rows.
// Retention keeps every file a kept step's chain needs (writeTableShard's keep_from).
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
  uint32_t checkpoint_increments = 0;  // increments after each full checkpoint (0: every one is full)
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
// older than `keep_from`: the newest step the caller knows `latest` to name (or a newer one), or the
// full checkpoint that step's chain starts at (0: none known, nothing is removed). The server cannot
// read `latest` itself: with a folder per pod (k8s/overlays/recovery) only worker 0's folder has one.
Status writeTableShard(const ShardPlace& place, const TableLayout& layout, const TableRowsRef& rows, uint64_t step,
                       uint64_t keep_from);
// Writes this server's increment at `step` over its checkpoint at `previous` (< step): the rows that
// changed since and the keys removed since; then removes shards as writeTableShard does.
Status writeTableIncrement(const ShardPlace& place, const TableLayout& layout, const TableRowsRef& changed,
                           const std::vector<uint64_t>& removed, uint64_t previous, uint64_t step, uint64_t keep_from);

// The longest chain of increments a restore follows.
constexpr uint32_t kMaxCheckpointIncrements = 1000;

struct ShardRestore {
  uint32_t old_servers = 0;  // servers of the job that wrote the checkpoint
  uint32_t shards_read = 0;
  uint64_t rows_skipped = 0;       // rows of the shards read that other servers own now
  std::vector<std::string> files;  // the shards read, for messages
  // This server's own chain, when the number of servers is unchanged: the full checkpoint's step
  // and the increments over it (the next checkpoint continues the chain).
  uint64_t chain_base = 0;
  uint32_t chain_increments = 0;
};

// Reads the table as checkpointed at `step` into `rows`, keeping the rows this server owns
// (serverOfRow with place.num_servers). The number of servers that wrote it comes from server 0's
// shard; with the same number, this server reads only its own shard, otherwise every old shard
// (re-sharding). Every shard's header must match (step, rank, servers, table, job id) and its
// layout the declared one. `reserve(n)` is asked before n more rows are kept (the memory budget);
// no shard file larger than max_shard_bytes is read, no chain longer than kMaxCheckpointIncrements
// followed, and no chain whose rows add up to more than max_shard_bytes applied.
StatusOr<ShardRestore> readTableShards(const ShardPlace& place, const TableLayout& layout, uint64_t step,
                                       uint64_t max_shard_bytes, const std::function<Status(uint64_t)>& reserve,
                                       TableRows* rows);

}  // namespace zps
