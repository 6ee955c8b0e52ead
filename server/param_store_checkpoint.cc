// ParamStore's checkpoints (server/param_store.h): a table's rows written at a training step, in
// full or as an increment over the previous step (server/table_checkpoint.h), and read back at a
// DECLARE that asks for a restore, re-sharded when the number of servers changed.
#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "server/param_store.h"

namespace zps {

void ParamStore::checkpointAll() {
  if (place_.dir.empty()) return;
  for (auto& [key, t] : tables_) {
    if (t.async || t.completed == 0) continue;
    Status s = writeCheckpoint(t, t.completed);
    if (!s.ok()) LOG(ERROR) << "server " << server_rank_ << ": final checkpoint of '" << t.name << "': " << s.message();
  }
}

TableLayout ParamStore::layoutOf(const Table& t) {
  return TableLayout{t.name, t.dim, static_cast<uint32_t>(t.optimizer.kind), static_cast<uint32_t>(t.state_floats)};
}

Status ParamStore::checkpointRequested(Table& t, uint64_t step) {
  if (t.requested != 0 && t.requested < step) t.committed = std::max(t.committed, t.requested);
  t.requested = step;
  return writeCheckpoint(t, step);
}

Status ParamStore::writeCheckpoint(Table& t, uint64_t step) {
  const TableLayout layout = layoutOf(t);
  // An increment builds on this server's previous shard, up to ZPS_TABLE_CHECKPOINT_INCREMENTS in a
  // row; a second checkpoint of the same step (SIGTERM's) is written whole.
  const bool increment = place_.checkpoint_increments > 0 && t.last_written != 0 && step > t.last_written &&
                         t.increments < place_.checkpoint_increments;
  // Retention keeps the chain `committed` needs, from its full shard on. A committed step without a
  // known chain (restored from another number of servers) keeps everything.
  uint64_t keep_from = 0;
  if (t.committed != 0) {
    auto base = t.chain_base.find(t.committed);
    keep_from = base != t.chain_base.end() ? base->second : place_.checkpoint_increments == 0 ? t.committed : 0;
  }
  TableRows copy;
  if (increment) {
    t.rows.copyRows(/*changed_only=*/true, &copy);
    ZPS_RETURN_IF_ERROR(writeTableIncrement(place_, layout, copy.ref(), t.rows.removedSinceCheckpoint(), t.last_written,
                                            step, keep_from));
  } else if (t.rows.format() == RowFormat::kFloat32) {
    ZPS_RETURN_IF_ERROR(writeTableShard(place_, layout, t.rows.allRows32(), step, keep_from));
  } else {
    t.rows.copyRows(/*changed_only=*/false, &copy);
    ZPS_RETURN_IF_ERROR(writeTableShard(place_, layout, copy.ref(), step, keep_from));
  }
  const uint64_t written = increment ? copy.keys.size() : t.rows.size();
  const size_t removed = increment ? t.rows.removedSinceCheckpoint().size() : 0;
  const uint64_t previous = t.last_written;
  t.chain_base[step] = increment ? t.chain_base[previous] : step;
  t.chain_base.erase(t.chain_base.begin(), t.chain_base.lower_bound(keep_from));
  t.increments = increment ? t.increments + 1 : 0;
  t.last_written = step;
  t.counts.checkpoint_rows = written;
  t.rows.markCheckpointed();
  // The checksum is of every row held, increment or not: the same number a full checkpoint and a
  // restore report.
  uint64_t checksum = 0;
  if (t.rows.format() == RowFormat::kFloat32) {
    checksum = tableRowsChecksum(layout, t.rows.allRows32());
  } else {
    TableRows all;
    t.rows.copyRows(/*changed_only=*/false, &all);
    checksum = tableRowsChecksum(layout, all.ref());
  }
  LOG(INFO) << "server " << server_rank_ << ": checkpointed table '" << t.name << "' (" << t.rows.size()
            << " rows, checksum " << std::hex << checksum << std::dec << ") at step " << step
            << (increment ? " as an increment over step " + std::to_string(previous) + " (" + std::to_string(written) +
                                " changed rows, " + std::to_string(removed) + " evicted)"
                          : std::string());
  return Status::OK();
}

Status ParamStore::restore(Table& t, uint64_t step) {
  const TableLayout layout = layoutOf(t);
  const uint64_t row_bytes = t.rows.rowBytes();
  uint64_t taken = 0;
  TableRows rows;
  auto reserve = [&](uint64_t n) {
    const uint64_t bytes = n * row_bytes;
    const std::string what = "restoring " + std::to_string(n) + " rows of table '" + t.name + "'";
    ZPS_RETURN_IF_ERROR(memory_.take(bytes, what));
    if (budget_ != nullptr && !budget_->reserveRows(bytes)) {
      memory_.give(bytes);
      return FailedPrecondition(what + " needs " + std::to_string(bytes) + " bytes, more than ZPS_TABLE_MEMORY_BYTES=" +
                                std::to_string(budget_->tables().max_bytes) + " leaves; raise it or add servers");
    }
    taken += bytes;
    return Status::OK();
  };
  auto restored = readTableShards(place_, layout, step, max_shard_bytes_, reserve, &rows);
  Status s = restored.ok() ? Status::OK() : restored.status();
  // A shard that `latest` needs and that is missing is refused like a damaged one.
  if (s.code() == StatusCode::kNotFound) s = InvalidArgument(s.message());
  const size_t state_count = t.state_floats * t.dim;
  for (size_t i = 0; s.ok() && i < rows.keys.size(); ++i) {
    if (t.rows.find(rows.keys[i]) != RowStore::kNoRow) {
      std::string files;
      for (const auto& f : restored->files) files += (files.empty() ? "" : ", ") + f;
      s = InvalidArgument("row " + std::to_string(rows.keys[i]) + " appears twice in the checkpoint (" + files + ")");
      break;
    }
    t.rows.add(rows.keys[i], rows.values.data() + i * t.dim, rows.state.data() + i * state_count, rows.steps[i], 0);
  }
  if (!s.ok()) {
    t.rows = RowStore(t.dim, static_cast<uint32_t>(t.state_floats), row_format_);
    memory_.give(taken);
    if (budget_ != nullptr) budget_->releaseRows(taken);
    return s.withContext("restoring table '" + t.name + "' from step " + std::to_string(step));
  }
  rows_charged_ += taken;
  t.rows.markCheckpointed();
  t.completed = step;
  t.committed = step;
  // The next checkpoint continues this server's chain; after a re-shard it starts a new one.
  const bool same = restored->old_servers == place_.num_servers;
  t.last_written = same ? step : 0;
  t.increments = same ? restored->chain_increments : 0;
  if (same) t.chain_base[step] = restored->chain_base;
  const uint64_t checksum = tableRowsChecksum(layout, rows.ref());
  LOG(INFO) << "server " << server_rank_ << ": restored table '" << t.name << "' (" << t.rows.size()
            << " rows, checksum " << std::hex << checksum << std::dec << ") from step " << step << ", "
            << restored->shards_read << " shard(s) of a job of " << restored->old_servers << " server(s)"
            << (restored->files.size() > restored->shards_read
                    ? " (" + std::to_string(restored->files.size()) + " files with their increments)"
                    : std::string())
            << (restored->old_servers != place_.num_servers
                    ? " re-sharded to " + std::to_string(place_.num_servers) + " servers (" +
                          std::to_string(restored->rows_skipped) + " rows belong to other servers now)"
                    : std::string());
  return Status::OK();
}

}  // namespace zps
