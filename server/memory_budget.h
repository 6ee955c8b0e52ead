// MemoryBudget: the bytes one server may hold for keys and table rows (ZPS_SERVER_MAX_BYTES), shared by
// its engine threads. A store reserves before it allocates for a new key or row and gives back what it
// holds when it goes away. A refused reservation becomes an error reply to the peer that asked, so no
// peer can make the server allocate past its cap, and the server keeps serving everyone else.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "server/row_store.h"
#include "zps/status.h"

namespace zps {

// How a server holds table rows: the bytes all its tables' rows may take before the least recently
// used are evicted (0: no limit) and the format of their values.
struct TableRowPolicy {
  uint64_t max_bytes = 0;
  RowFormat format = RowFormat::kFloat32;
};

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t cap, TableRowPolicy tables = {}) : cap_(cap), tables_(tables) {}
  // Reserves `bytes` for `what` ("key 7 of 'grad'"), or kFailedPrecondition naming the cap and a
  // rate-limited warning in the log.
  Status reserve(uint64_t bytes, const std::string& what);
  void release(uint64_t bytes) { used_.fetch_sub(bytes); }
  // Takes `bytes` even past the cap: what was promised earlier (rows of an acknowledged round).
  void reserveAnyway(uint64_t bytes) { used_.fetch_add(bytes); }
  uint64_t used() const { return used_.load(); }
  uint64_t cap() const { return cap_; }

  // Table rows. reserveRows answers whether `bytes` more fit the table budget (and takes them); with
  // `force` it takes them even past it (rows a round already acknowledged must be created).
  const TableRowPolicy& tables() const { return tables_; }
  bool reserveRows(uint64_t bytes, bool force = false);
  void releaseRows(uint64_t bytes) { rows_used_.fetch_sub(bytes); }
  uint64_t rowsUsed() const { return rows_used_.load(); }

 private:
  const uint64_t cap_;
  const TableRowPolicy tables_;
  std::atomic<uint64_t> rows_used_{0};
  std::atomic<uint64_t> used_{0};
  std::atomic<int64_t> next_warning_ms_{0};
  std::atomic<uint64_t> refused_{0};
};

// What one store holds of a budget; given back when the store goes away. A null budget never refuses.
class MemoryCharge {
 public:
  explicit MemoryCharge(MemoryBudget* budget) : budget_(budget) {}
  ~MemoryCharge() {
    if (budget_ != nullptr) budget_->release(held_);
  }
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  Status take(uint64_t bytes, const std::string& what) {
    if (budget_ != nullptr) ZPS_RETURN_IF_ERROR(budget_->reserve(bytes, what));
    held_ += bytes;
    return Status::OK();
  }
  void takeAnyway(uint64_t bytes) {
    if (budget_ != nullptr) budget_->reserveAnyway(bytes);
    held_ += bytes;
  }
  // Gives back part of what was taken (what turned out not to be kept).
  void give(uint64_t bytes) {
    if (budget_ != nullptr) budget_->release(bytes);
    held_ -= bytes;
  }

 private:
  MemoryBudget* const budget_;
  uint64_t held_ = 0;
};

}  // namespace zps
