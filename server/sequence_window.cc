#include "server/sequence_window.h"

#include <atomic>

namespace zps {
namespace {

std::atomic<uint64_t> duplicates{0};

}  // namespace

void countDuplicateAsyncPush() { duplicates.fetch_add(1, std::memory_order_relaxed); }

uint64_t duplicateAsyncPushes() { return duplicates.load(std::memory_order_relaxed); }

SequenceWindow::Verdict SequenceWindow::check(uint64_t seq, std::string* why) const {
  if (seq == 0) {
    *why = "an async push needs a sequence number (push_seq from 1)";
    return Verdict::kRefused;
  }
  if (seq > newest_) {
    if (seq - newest_ <= kWindow) return Verdict::kApply;
    *why = "async push number " + std::to_string(seq) + " is more than " + std::to_string(kWindow) +
           " past the newest applied (" + std::to_string(newest_) + ")";
    return Verdict::kRefused;
  }
  const uint64_t behind = newest_ - seq;
  if (behind >= kWindow) {
    *why = "async push number " + std::to_string(seq) + " is " + std::to_string(kWindow) +
           " or more behind the newest applied (" + std::to_string(newest_) +
           "): too old to tell whether it was applied, so it is not";
    return Verdict::kRefused;
  }
  return (mask_ >> behind & 1) != 0 ? Verdict::kDuplicate : Verdict::kApply;
}

void SequenceWindow::applied(uint64_t seq) {
  if (seq > newest_) {
    const uint64_t shift = seq - newest_;
    mask_ = shift >= kWindow ? 0 : mask_ << shift;
    mask_ |= 1;
    newest_ = seq;
  } else if (newest_ - seq < kWindow) {
    mask_ |= uint64_t{1} << (newest_ - seq);
  }
}

}  // namespace zps
