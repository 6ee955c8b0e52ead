#include "ps/server/table_checkpoint.h"

#include <cstdio>
#include <cstring>
#include <optional>

#include "ps/common/checkpoint.h"
#include "ps/common/checkpoint_dir.h"
#include "ps/common/row_placement.h"

namespace zps {
namespace {

std::string fileNameOf(const std::string& table) {
  std::string safe;
  for (char c : table.substr(0, 64)) {
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    safe += plain ? c : '_';
  }
  char crc[9];
  std::snprintf(crc, sizeof(crc), "%08x", crc32(table.data(), table.size()));
  return "table-" + safe + "-" + crc + "-server-";
}

// The step of a shard file of `table` (any server), or nullopt.
std::optional<uint64_t> shardStep(const std::string& table_prefix, const std::string& name) {
  if (name.compare(0, table_prefix.size(), table_prefix) != 0) return std::nullopt;
  const size_t at = name.find("-step-", table_prefix.size());
  if (at == std::string::npos || at == table_prefix.size()) return std::nullopt;
  const std::string rank = name.substr(table_prefix.size(), at - table_prefix.size());
  if (rank.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return stepInFileName(name.substr(at), "-step-", ".ckpt");
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

uint64_t rowHash(uint64_t key, uint64_t updates, const float* values, size_t dim, const float* state,
                 size_t state_count) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv1a(h, &key, sizeof(key));
  h = fnv1a(h, &updates, sizeof(updates));
  h = fnv1a(h, values, dim * sizeof(float));
  return fnv1a(h, state, state_count * sizeof(float));
}

// Appends the rows of one shard's payload that this server owns now to `rows`. Every row must belong
// to the server that wrote the shard (`writer`: its rank and the number of servers then), so no row
// can come from two shards.
Status takeRows(const std::string& path, const std::string& payload, const TableLayout& layout, const ShardPlace& place,
                const CheckpointShape& writer, const std::function<Status(uint64_t)>& reserve, TableRows* rows,
                ShardRestore* report) {
  PayloadReader r(payload);
  const std::string bad = "checkpoint " + path + " does not match table '" + layout.name + "': ";
  uint32_t name_len = 0, dim = 0, kind = 0, state_floats = 0;
  uint64_t count = 0;
  if (!r.get(&name_len) || name_len > r.remaining()) return InvalidArgument(bad + "truncated name");
  std::string name(name_len, '\0');
  r.getBytes(name.data(), name_len);
  if (!r.get(&dim) || !r.get(&kind) || !r.get(&state_floats) || !r.get(&count))
    return InvalidArgument(bad + "truncated");
  if (name != layout.name || dim != layout.dim || kind != layout.optimizer_kind || state_floats != layout.state_floats)
    return InvalidArgument(bad + "it holds '" + name + "' dim " + std::to_string(dim) + " optimizer " +
                           std::to_string(kind) + ", the table is dim " + std::to_string(layout.dim) + " optimizer " +
                           std::to_string(layout.optimizer_kind));
  if (dim == 0 || dim > 65536 || state_floats > 16) return InvalidArgument(bad + "dim or state out of range");
  const size_t state_count = size_t{state_floats} * dim;
  const size_t per_row = sizeof(uint64_t) * 2 + (size_t{dim} + state_count) * sizeof(float);
  if (count > r.remaining() / per_row || count * per_row != r.remaining())
    return InvalidArgument(bad + "row count " + std::to_string(count) + " does not match its size");
  const char* base = payload.data() + (payload.size() - r.remaining());
  auto keyAt = [&](uint64_t i) {
    uint64_t k = 0;
    std::memcpy(&k, base + i * per_row, sizeof(k));
    return k;
  };
  uint64_t owned = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t key = keyAt(i);
    const int owner = serverOfRow(key, static_cast<int>(writer.num_servers));
    if (owner != static_cast<int>(writer.server_rank))
      return InvalidArgument(bad + "row " + std::to_string(key) + " belongs to server " + std::to_string(owner) +
                             " of " + std::to_string(writer.num_servers) + ", not to server " +
                             std::to_string(writer.server_rank) + " whose shard this is");
    owned += serverOfRow(key, static_cast<int>(place.num_servers)) == static_cast<int>(place.server_rank) ? 1 : 0;
  }
  ZPS_RETURN_IF_ERROR(reserve(owned));
  const size_t old_rows = rows->keys.size();
  rows->keys.reserve(old_rows + owned);
  rows->steps.reserve(old_rows + owned);
  rows->values.reserve((old_rows + owned) * dim);
  rows->state.reserve((old_rows + owned) * state_count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t key = keyAt(i);
    if (serverOfRow(key, static_cast<int>(place.num_servers)) != static_cast<int>(place.server_rank)) {
      ++report->rows_skipped;
      continue;
    }
    const char* row = base + i * per_row;
    uint64_t updates = 0;
    std::memcpy(&updates, row + sizeof(uint64_t), sizeof(updates));
    rows->keys.push_back(key);
    rows->steps.push_back(updates);
    const size_t v = rows->values.size(), s = rows->state.size();
    rows->values.resize(v + dim);
    rows->state.resize(s + state_count);
    std::memcpy(rows->values.data() + v, row + 2 * sizeof(uint64_t), dim * sizeof(float));
    if (state_count > 0)
      std::memcpy(rows->state.data() + s, row + 2 * sizeof(uint64_t) + dim * sizeof(float),
                  state_count * sizeof(float));
  }
  ++report->shards_read;
  return Status::OK();
}

}  // namespace

std::string tableShardPath(const std::string& dir, const std::string& table, uint32_t server_rank, uint64_t step) {
  return dir + "/" + fileNameOf(table) + std::to_string(server_rank) + "-step-" + std::to_string(step) + ".ckpt";
}

uint64_t tableRowsChecksum(const TableLayout& layout, const TableRowsRef& rows) {
  const size_t state_count = size_t{layout.state_floats} * layout.dim;
  uint64_t sum = 0;
  for (size_t i = 0; i < rows.keys.size(); ++i)
    sum += rowHash(rows.keys[i], rows.steps[i], rows.values.data() + i * layout.dim, layout.dim,
                   rows.state.data() + i * state_count, state_count);
  return sum;
}

Status writeTableShard(const ShardPlace& place, const TableLayout& layout, const TableRowsRef& rows, uint64_t step,
                       uint64_t committed) {
  PayloadWriter w;
  w.put(static_cast<uint32_t>(layout.name.size()));
  w.putBytes(layout.name.data(), layout.name.size());
  w.put(layout.dim);
  w.put(layout.optimizer_kind);
  w.put(layout.state_floats);
  w.put(static_cast<uint64_t>(rows.keys.size()));
  const size_t state_count = size_t{layout.state_floats} * layout.dim;
  for (size_t slot = 0; slot < rows.keys.size(); ++slot) {
    w.put(rows.keys[slot]);
    w.put(rows.steps[slot]);
    w.putBytes(rows.values.data() + slot * layout.dim, layout.dim * sizeof(float));
    w.putBytes(rows.state.data() + slot * state_count, state_count * sizeof(float));
  }
  CheckpointShape shape;
  shape.kind = CheckpointKind::kParamTable;
  shape.step = step;
  shape.server_rank = place.server_rank;
  shape.num_servers = place.num_servers;
  shape.table = layout.name;
  shape.job_id = place.job_id;
  ZPS_RETURN_IF_ERROR(
      writeCheckpointFile(tableShardPath(place.dir, layout.name, place.server_rank, step), shape, w.take()));
  const std::string prefix = fileNameOf(layout.name);
  removeStepsBefore(place.dir, committed, [&prefix](const std::string& name) { return shardStep(prefix, name); });
  return Status::OK();
}

StatusOr<ShardRestore> readTableShards(const ShardPlace& place, const TableLayout& layout, uint64_t step,
                                       uint64_t max_shard_bytes, const std::function<Status(uint64_t)>& reserve,
                                       TableRows* rows) {
  CheckpointShape expected;
  expected.kind = CheckpointKind::kParamTable;
  expected.step = step;
  expected.num_servers = 0;  // learnt from the first shard read
  expected.table = layout.name;
  expected.job_id = place.job_id;
  // Server 0's shard says how many servers wrote the step. A server whose own shard records today's
  // number of servers needs no other shard: with a checkpoint folder per server
  // (k8s/overlays/recovery) the other servers' shards are not in its folder.
  expected.server_rank = place.server_rank;
  std::string first = tableShardPath(place.dir, layout.name, place.server_rank, step);
  auto own = readCheckpointShape(first);  // missing or unreadable: server 0's shard decides
  if (!own.ok() || own->num_servers != place.num_servers) {
    expected.server_rank = 0;
    first = tableShardPath(place.dir, layout.name, 0, step);
  }
  ZPS_ASSIGN_OR_RETURN(CheckpointShape shape0, readCheckpointShape(first));
  ZPS_RETURN_IF_ERROR(checkCheckpointShape(first, shape0, expected));
  ShardRestore report;
  report.old_servers = shape0.num_servers;
  expected.num_servers = shape0.num_servers;
  const bool same = shape0.num_servers == place.num_servers;
  for (uint32_t r = 0; r < shape0.num_servers; ++r) {
    if (same && r != place.server_rank) continue;
    expected.server_rank = r;
    const std::string path = tableShardPath(place.dir, layout.name, r, step);
    auto file = readCheckpointFile(path, expected, max_shard_bytes);
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kNotFound && !same)
        return InvalidArgument("re-sharding table '" + layout.name + "' from " + std::to_string(shape0.num_servers) +
                               " servers to " + std::to_string(place.num_servers) + ": " + file.status().message());
      return file.status();
    }
    ZPS_RETURN_IF_ERROR(takeRows(path, file->payload, layout, place, file->shape, reserve, rows, &report));
    report.files.push_back(path);
  }
  return report;
}

}  // namespace zps
