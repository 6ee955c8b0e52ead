#include "server/table_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>

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

// One shard file, parsed and checked: a full shard or an increment. `rows` points into the payload.
struct ShardPayload {
  bool increment = false;
  uint64_t previous = 0;
  std::vector<uint64_t> removed;
  const char* rows = nullptr;
  uint64_t count = 0;
  size_t per_row = 0;
  uint64_t keyAt(uint64_t i) const {
    uint64_t k = 0;
    std::memcpy(&k, rows + i * per_row, sizeof(k));
    return k;
  }
};

// Parses one shard's payload. Every row and removed key must belong to the server that wrote the
// shard (`writer`: its rank and the number of servers then), so no row can come from two shards.
StatusOr<ShardPayload> parseShard(const std::string& path, const CheckpointFile& file, const TableLayout& layout) {
  const std::string& payload = file.payload;
  const CheckpointShape& writer = file.shape;
  PayloadReader r(payload);
  const std::string bad = "checkpoint " + path + " does not match table '" + layout.name + "': ";
  uint32_t name_len = 0, dim = 0, kind = 0, state_floats = 0;
  ShardPayload shard;
  shard.increment = writer.kind == CheckpointKind::kParamTableIncrement;
  if (!r.get(&name_len) || name_len > r.remaining()) return InvalidArgument(bad + "truncated name");
  std::string name(name_len, '\0');
  r.getBytes(name.data(), name_len);
  if (!r.get(&dim) || !r.get(&kind) || !r.get(&state_floats)) return InvalidArgument(bad + "truncated");
  if (name != layout.name || dim != layout.dim || kind != layout.optimizer_kind || state_floats != layout.state_floats)
    return InvalidArgument(bad + "it holds '" + name + "' dim " + std::to_string(dim) + " optimizer " +
                           std::to_string(kind) + ", the table is dim " + std::to_string(layout.dim) + " optimizer " +
                           std::to_string(layout.optimizer_kind));
  if (dim == 0 || dim > 65536 || state_floats > 16) return InvalidArgument(bad + "dim or state out of range");
  if (shard.increment) {
    uint64_t removed = 0;
    if (!r.get(&shard.previous) || !r.get(&removed)) return InvalidArgument(bad + "truncated increment");
    if (shard.previous == 0 || shard.previous >= writer.step)
      return InvalidArgument(bad + "the increment at step " + std::to_string(writer.step) + " builds on step " +
                             std::to_string(shard.previous) + ", not an earlier one");
    if (removed > r.remaining() / sizeof(uint64_t))
      return InvalidArgument(bad + "removed count " + std::to_string(removed) + " does not match its size");
    shard.removed.resize(removed);
    r.getBytes(shard.removed.data(), removed * sizeof(uint64_t));
  }
  if (!r.get(&shard.count)) return InvalidArgument(bad + "truncated");
  const size_t state_count = size_t{state_floats} * dim;
  shard.per_row = sizeof(uint64_t) * 2 + (size_t{dim} + state_count) * sizeof(float);
  if (shard.count > r.remaining() / shard.per_row || shard.count * shard.per_row != r.remaining())
    return InvalidArgument(bad + "row count " + std::to_string(shard.count) + " does not match its size");
  shard.rows = payload.data() + (payload.size() - r.remaining());
  auto owned = [&](uint64_t key) -> Status {
    const int owner = serverOfRow(key, static_cast<int>(writer.num_servers));
    if (owner == static_cast<int>(writer.server_rank)) return Status::OK();
    return InvalidArgument(bad + "row " + std::to_string(key) + " belongs to server " + std::to_string(owner) + " of " +
                           std::to_string(writer.num_servers) + ", not to server " +
                           std::to_string(writer.server_rank) + " whose shard this is");
  };
  for (uint64_t i = 0; i < shard.count; ++i) ZPS_RETURN_IF_ERROR(owned(shard.keyAt(i)));
  for (uint64_t key : shard.removed) ZPS_RETURN_IF_ERROR(owned(key));
  return shard;
}

// Reads the shard file of `expected.server_rank` at `expected.step`, full or increment.
StatusOr<CheckpointFile> readShardFile(const std::string& path, CheckpointShape expected, uint64_t max_shard_bytes) {
  ZPS_ASSIGN_OR_RETURN(CheckpointShape found, readCheckpointShape(path));
  if (found.kind == CheckpointKind::kParamTableIncrement) expected.kind = found.kind;
  return readCheckpointFile(path, expected, max_shard_bytes);
}

// One old shard's rows as a chain of files builds them: the full shard's, then each increment's.
class ChainRows {
 public:
  ChainRows(const TableLayout& layout, uint64_t max_bytes)
      : dim_(layout.dim), state_count_(size_t{layout.state_floats} * layout.dim), max_bytes_(max_bytes) {}

  Status apply(const std::string& path, const ShardPayload& shard) {
    for (uint64_t key : shard.removed) {
      auto it = at_.find(key);
      if (it == at_.end()) continue;  // evicted before the previous checkpoint saw it change: nothing to undo
      const size_t slot = it->second;
      at_.erase(it);
      removeRow(slot);
    }
    for (uint64_t i = 0; i < shard.count; ++i) {
      const char* row = shard.rows + i * shard.per_row;
      const uint64_t key = shard.keyAt(i);
      auto [it, fresh] = at_.try_emplace(key, rows_.keys.size());
      if (fresh) {
        if ((rows_.keys.size() + 1) * shard.per_row > max_bytes_)
          return InvalidArgument("checkpoint " + path + ": the chain of increments holds more than " +
                                 std::to_string(max_bytes_) + " bytes of rows");
        rows_.keys.push_back(key);
        rows_.steps.push_back(0);
        rows_.values.resize(rows_.values.size() + dim_);
        rows_.state.resize(rows_.state.size() + state_count_);
      } else if (!shard.increment) {
        return InvalidArgument("row " + std::to_string(key) + " appears twice in the checkpoint (" + path + ")");
      }
      const size_t slot = it->second;
      std::memcpy(&rows_.steps[slot], row + sizeof(uint64_t), sizeof(uint64_t));
      std::memcpy(rows_.values.data() + slot * dim_, row + 2 * sizeof(uint64_t), dim_ * sizeof(float));
      if (state_count_ > 0)
        std::memcpy(rows_.state.data() + slot * state_count_, row + 2 * sizeof(uint64_t) + dim_ * sizeof(float),
                    state_count_ * sizeof(float));
    }
    return Status::OK();
  }

  // Appends the live rows this server owns now to `out` (asking `reserve` first) and counts the others.
  Status takeOwned(const ShardPlace& place, const std::function<Status(uint64_t)>& reserve, TableRows* out,
                   ShardRestore* report) const {
    auto mine = [&](uint64_t key) {
      return serverOfRow(key, static_cast<int>(place.num_servers)) == static_cast<int>(place.server_rank);
    };
    uint64_t owned = 0;
    for (size_t i = 0; i < rows_.keys.size(); ++i) owned += mine(rows_.keys[i]) ? 1 : 0;
    ZPS_RETURN_IF_ERROR(reserve(owned));
    out->keys.reserve(out->keys.size() + owned);
    out->steps.reserve(out->steps.size() + owned);
    out->values.reserve(out->values.size() + owned * dim_);
    out->state.reserve(out->state.size() + owned * state_count_);
    for (size_t i = 0; i < rows_.keys.size(); ++i) {
      if (!mine(rows_.keys[i])) {
        ++report->rows_skipped;
        continue;
      }
      out->keys.push_back(rows_.keys[i]);
      out->steps.push_back(rows_.steps[i]);
      out->values.insert(out->values.end(), rows_.values.begin() + i * dim_, rows_.values.begin() + (i + 1) * dim_);
      out->state.insert(out->state.end(), rows_.state.begin() + i * state_count_,
                        rows_.state.begin() + (i + 1) * state_count_);
    }
    return Status::OK();
  }

 private:
  const size_t dim_;
  const size_t state_count_;
  const uint64_t max_bytes_;
  // The last row takes the removed row's place, so the rows stay dense and bounded by max_bytes_
  // however many times a chain evicts and re-creates them.
  void removeRow(size_t slot) {
    const size_t last = rows_.keys.size() - 1;
    if (slot != last) {
      rows_.keys[slot] = rows_.keys[last];
      rows_.steps[slot] = rows_.steps[last];
      std::copy_n(rows_.values.begin() + last * dim_, dim_, rows_.values.begin() + slot * dim_);
      std::copy_n(rows_.state.begin() + last * state_count_, state_count_, rows_.state.begin() + slot * state_count_);
      at_[rows_.keys[slot]] = slot;
    }
    rows_.keys.pop_back();
    rows_.steps.pop_back();
    rows_.values.resize(rows_.values.size() - dim_);
    rows_.state.resize(rows_.state.size() - state_count_);
  }

  TableRows rows_;
  std::unordered_map<uint64_t, size_t> at_;  // key -> its row in rows_
};

// Reads old shard `expected.server_rank` at `expected.step` with the chain it needs into `rows`.
Status readChain(const ShardPlace& place, const TableLayout& layout, CheckpointShape expected, uint64_t max_shard_bytes,
                 ChainRows* rows, ShardRestore* report) {
  // Back from the step to its full shard (each increment names the step it builds on), then forward.
  std::vector<uint64_t> steps;
  std::optional<CheckpointFile> base;
  std::string base_path;
  for (uint64_t step = expected.step;;) {
    expected.step = step;
    const std::string path = tableShardPath(place.dir, layout.name, expected.server_rank, step);
    auto file = readShardFile(path, expected, max_shard_bytes);
    if (!file.ok()) {
      if (steps.empty() || file.status().code() != StatusCode::kNotFound) return file.status();
      return InvalidArgument("the increment " + report->files.back() + " builds on step " + std::to_string(step) +
                             ", whose shard is missing: " + file.status().message());
    }
    report->files.push_back(path);
    if (file->shape.kind == CheckpointKind::kParamTable) {
      base = std::move(*file);
      base_path = path;
      break;
    }
    ZPS_ASSIGN_OR_RETURN(ShardPayload shard, parseShard(path, *file, layout));
    if (steps.size() >= kMaxCheckpointIncrements)
      return InvalidArgument("checkpoint " + path + ": more than " + std::to_string(kMaxCheckpointIncrements) +
                             " increments in a row; the chain is damaged");
    steps.push_back(step);
    step = shard.previous;
  }
  ZPS_ASSIGN_OR_RETURN(ShardPayload full, parseShard(base_path, *base, layout));
  ZPS_RETURN_IF_ERROR(rows->apply(base_path, full));
  const uint64_t base_step = base->shape.step;
  base.reset();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    expected.step = *it;
    const std::string path = tableShardPath(place.dir, layout.name, expected.server_rank, *it);
    ZPS_ASSIGN_OR_RETURN(CheckpointFile file, readShardFile(path, expected, max_shard_bytes));
    ZPS_ASSIGN_OR_RETURN(ShardPayload shard, parseShard(path, file, layout));
    ZPS_RETURN_IF_ERROR(rows->apply(path, shard));
  }
  if (expected.server_rank == place.server_rank) {
    report->chain_base = base_step;
    report->chain_increments = static_cast<uint32_t>(steps.size());
  }
  return Status::OK();
}

// The payload both kinds of shard begin with.
PayloadWriter payloadHead(const TableLayout& layout) {
  PayloadWriter w;
  w.put(static_cast<uint32_t>(layout.name.size()));
  w.putBytes(layout.name.data(), layout.name.size());
  w.put(layout.dim);
  w.put(layout.optimizer_kind);
  w.put(layout.state_floats);
  return w;
}

Status writeShard(const ShardPlace& place, const TableLayout& layout, PayloadWriter w, const TableRowsRef& rows,
                  CheckpointKind kind, uint64_t step, uint64_t keep_from) {
  w.put(static_cast<uint64_t>(rows.keys.size()));
  const size_t state_count = size_t{layout.state_floats} * layout.dim;
  for (size_t slot = 0; slot < rows.keys.size(); ++slot) {
    w.put(rows.keys[slot]);
    w.put(rows.steps[slot]);
    w.putBytes(rows.values.data() + slot * layout.dim, layout.dim * sizeof(float));
    w.putBytes(rows.state.data() + slot * state_count, state_count * sizeof(float));
  }
  CheckpointShape shape;
  shape.kind = kind;
  shape.step = step;
  shape.server_rank = place.server_rank;
  shape.num_servers = place.num_servers;
  shape.table = layout.name;
  shape.job_id = place.job_id;
  ZPS_RETURN_IF_ERROR(
      writeCheckpointFile(tableShardPath(place.dir, layout.name, place.server_rank, step), shape, w.take()));
  const std::string prefix = fileNameOf(layout.name);
  removeStepsBefore(place.dir, keep_from, [&prefix](const std::string& name) { return shardStep(prefix, name); });
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
                       uint64_t keep_from) {
  return writeShard(place, layout, payloadHead(layout), rows, CheckpointKind::kParamTable, step, keep_from);
}

Status writeTableIncrement(const ShardPlace& place, const TableLayout& layout, const TableRowsRef& changed,
                           const std::vector<uint64_t>& removed, uint64_t previous, uint64_t step, uint64_t keep_from) {
  if (previous == 0 || previous >= step)
    return InvalidArgument("an increment at step " + std::to_string(step) + " cannot build on step " +
                           std::to_string(previous));
  PayloadWriter w = payloadHead(layout);
  w.put(previous);
  w.put(static_cast<uint64_t>(removed.size()));
  w.putBytes(removed.data(), removed.size() * sizeof(uint64_t));
  return writeShard(place, layout, std::move(w), changed, CheckpointKind::kParamTableIncrement, step, keep_from);
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
  if (shape0.kind == CheckpointKind::kParamTableIncrement) expected.kind = shape0.kind;
  ZPS_RETURN_IF_ERROR(checkCheckpointShape(first, shape0, expected));
  expected.kind = CheckpointKind::kParamTable;  // each file's own kind is read with it
  ShardRestore report;
  report.old_servers = shape0.num_servers;
  expected.num_servers = shape0.num_servers;
  const bool same = shape0.num_servers == place.num_servers;
  for (uint32_t r = 0; r < shape0.num_servers; ++r) {
    if (same && r != place.server_rank) continue;
    expected.server_rank = r;
    ChainRows chain(layout, max_shard_bytes);
    Status s = readChain(place, layout, expected, max_shard_bytes, &chain, &report);
    if (!s.ok()) {
      if (s.code() == StatusCode::kNotFound && !same)
        return InvalidArgument("re-sharding table '" + layout.name + "' from " + std::to_string(shape0.num_servers) +
                               " servers to " + std::to_string(place.num_servers) + ": " + s.message());
      return s;
    }
    ZPS_RETURN_IF_ERROR(chain.takeOwned(place, reserve, rows, &report));
    ++report.shards_read;
  }
  return report;
}

}  // namespace zps
