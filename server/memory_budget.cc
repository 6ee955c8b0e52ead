#include "server/memory_budget.h"

#include <glog/logging.h>

#include <chrono>

namespace zps {

Status MemoryBudget::reserve(uint64_t bytes, const std::string& what) {
  uint64_t used = used_.load();
  while (bytes <= cap_ && used <= cap_ - bytes) {
    if (used_.compare_exchange_weak(used, used + bytes)) return Status::OK();
  }
  std::string message = "server memory cap reached: " + what + " needs " + std::to_string(bytes) + " bytes but " +
                        std::to_string(used) + " of ZPS_SERVER_MAX_BYTES=" + std::to_string(cap_) +
                        " are in use; raise ZPS_SERVER_MAX_BYTES or add servers";
  uint64_t refused = ++refused_;
  // One warning per 10 s at most: a peer that keeps asking must not flood the log.
  int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
  int64_t next = next_warning_ms_.load();
  if (now >= next && next_warning_ms_.compare_exchange_strong(next, now + 10'000))
    LOG(WARNING) << message << " (" << refused << " refused so far)";
  return FailedPrecondition(message);
}

bool MemoryBudget::reserveRows(uint64_t bytes, bool force) {
  uint64_t used = rows_used_.load();
  for (;;) {
    const bool fits = tables_.max_bytes == 0 || (bytes <= tables_.max_bytes && used <= tables_.max_bytes - bytes);
    if (!fits && !force) return false;
    if (rows_used_.compare_exchange_weak(used, used + bytes)) return true;
  }
}

}  // namespace zps
