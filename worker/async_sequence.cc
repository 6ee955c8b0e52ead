#include "worker/async_sequence.h"

#include "ps/common/config.h"
#include "ps/wire/codec.h"

namespace zps {

StatusOr<uint64_t> AsyncSequence::begin(std::chrono::milliseconds timeout, const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  auto fits = [&] { return unanswered_.empty() || last_ + 1 - *unanswered_.begin() < wire::kAsyncPushWindow; };
  if (!ended_.wait_for(lock, timeout, fits)) {
    return DeadlineExceeded(what + ": async push " + std::to_string(*unanswered_.begin()) +
                            " of this key is still unanswered after " + secondsText(timeout) + " s, and a push " +
                            std::to_string(wire::kAsyncPushWindow) + " or more numbers after it has to wait for it");
  }
  const uint64_t seq = ++last_;
  unanswered_.insert(seq);
  return seq;
}

void AsyncSequence::end(uint64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    unanswered_.erase(seq);
  }
  ended_.notify_all();
}

size_t AsyncSequence::unanswered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unanswered_.size();
}

}  // namespace zps
