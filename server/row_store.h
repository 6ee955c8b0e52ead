// RowStore: the rows of one table on one server, in slot order, with what eviction and incremental
// checkpoints need to know about each row: when it was last used (a least-recently-used list) and
// whether it changed since the last checkpoint. Used by ParamStore on its engine thread only.
//
// Values are held as float32, or, to halve their memory, as float16 or bfloat16 (ZPS_TABLE_ROW_FORMAT):
// a row is widened to float32 to be read or updated and rounded back (to nearest even) when stored.
// The optimizer state (momentum, Adam's moments, Adagrad's sums) and the update count stay full
// width: halving them would make small updates vanish, which rounding the values alone does not do
// as badly because every update starts from the rounded value's full-width sum.
//
// Slots are dense: removing a row moves the last row into its slot, so the float32 values and the
// state stay one contiguous array each for the optimizer kernels (kernels/reducer.h's applyRows).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "server/table_checkpoint.h"
#include "zps/status.h"

namespace zps {

enum class RowFormat : uint8_t { kFloat32 = 0, kFloat16 = 1, kBfloat16 = 2 };

// "float32", "float16" or "bfloat16" (ZPS_TABLE_ROW_FORMAT's choices).
StatusOr<RowFormat> rowFormatFromName(const std::string& name);
const char* rowFormatName(RowFormat format);

class RowStore {
 public:
  static constexpr uint32_t kNoRow = 0xFFFFFFFFu;
  // What a row costs beyond its values and optimizer state: id (8), update count (8), last use (8),
  // use-list links (8), flags (1), its index entry (a hash-map node of 32 bytes and 8 to 16 of
  // buckets), and the arrays' growth headroom (up to an eighth). Resident memory per row measured
  // with zps-table-memory is within a few percent of the charge; docs/tables.md has the table.
  static constexpr uint64_t kRowOverhead = 96;

  RowStore() = default;
  RowStore(uint32_t dim, uint32_t state_floats, RowFormat format)
      : dim_(dim), state_count_(size_t{state_floats} * dim), format_(format) {}

  // The bytes one row of this shape is charged (its values, state and kRowOverhead).
  static uint64_t rowBytes(uint32_t dim, uint32_t state_floats, RowFormat format);
  uint64_t rowBytes() const;

  size_t size() const { return keys_.size(); }
  uint32_t dim() const { return dim_; }
  RowFormat format() const { return format_; }
  uint32_t find(uint64_t key) const;
  uint64_t key(uint32_t slot) const { return keys_[slot]; }

  // Adds a row as the most recently used (at `tick`) and changed since the last checkpoint. `values`
  // holds dim floats (rounded to the row format), `state` state_floats x dim (null: zeros).
  uint32_t add(uint64_t key, const float* values, const float* state, uint64_t updates, uint64_t tick);
  // Makes the row the most recently used.
  void touch(uint32_t slot, uint64_t tick);
  // The least recently used row (kNoRow when empty) and when it was used.
  uint32_t leastRecentlyUsed() const { return size() == 0 ? kNoRow : lru_oldest_; }
  uint64_t lastUsed(uint32_t slot) const { return last_used_[slot]; }
  // Removes a row; the last row takes its slot. A row the last checkpoint holds is remembered as
  // removed, for the next increment.
  void remove(uint32_t slot);

  // Update counts, values and state. Writing any of them marks the row changed.
  uint64_t updates(uint32_t slot) const { return updates_[slot]; }
  uint64_t nextUpdate(uint32_t slot);  // counts one more update and returns the count
  void readValues(uint32_t slot, float* out) const;
  void writeValues(uint32_t slot, const float* in);
  float* state(uint32_t slot) { return state_.data() + slot * state_count_; }
  // Float32 rows only: every row's values and state, by slot (the optimizer kernels update in place;
  // the caller marks what they change).
  float* values32() { return values_.data(); }
  float* stateData() { return state_.data(); }
  void markChanged(uint32_t slot);

  // Checkpoints. The rows as a checkpoint writes them (values widened to float32): all of them, or
  // only those changed since markCheckpointed().
  void copyRows(bool changed_only, TableRows* out) const;
  // Float32 rows only: all rows without a copy.
  TableRowsRef allRows32() const { return {keys_, updates_, values_, state_}; }
  // Rows of the last checkpoint removed since (evicted), in removal order.
  const std::vector<uint64_t>& removedSinceCheckpoint() const { return removed_; }
  size_t changedRows() const { return changed_count_; }
  // Every row is now in a checkpoint and unchanged since.
  void markCheckpointed();

 private:
  static constexpr uint8_t kChanged = 1;       // changed since the last checkpoint
  static constexpr uint8_t kCheckpointed = 2;  // the last checkpoint holds the row
  void unlink(uint32_t slot);
  void pushNewest(uint32_t slot);
  void relink(uint32_t from, uint32_t to);  // the row at `from` now lives at `to`

  uint32_t dim_ = 0;
  size_t state_count_ = 0;
  RowFormat format_ = RowFormat::kFloat32;
  std::unordered_map<uint64_t, uint32_t> index_;  // key -> slot
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> updates_;
  std::vector<float> values_;       // float32 rows: slot x dim
  std::vector<uint16_t> values16_;  // float16 / bfloat16 rows: slot x dim
  std::vector<float> state_;        // slot x state_floats x dim
  std::vector<uint64_t> last_used_;
  std::vector<uint32_t> older_, newer_;  // the use list's links (kNoRow at its ends)
  std::vector<uint8_t> flags_;
  uint32_t lru_oldest_ = kNoRow, lru_newest_ = kNoRow;
  size_t changed_count_ = 0;
  std::vector<uint64_t> removed_;
};

}  // namespace zps
