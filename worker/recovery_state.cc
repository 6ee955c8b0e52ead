#include "worker/recovery_state.h"

#include <algorithm>

namespace zps {

uint64_t RecoveryState::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void RecoveryState::start(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
  requests_->setGeneration(generation);
}

bool RecoveryState::notice(uint64_t announced, const Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (announced <= generation_) return false;
  announced_ = std::max(announced_, announced);
  if (!recovering_) {
    recovering_ = why;
    requests_->refuse(why);
  }
  return true;
}

std::optional<Status> RecoveryState::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recovering_;
}

bool RecoveryState::moved(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
  requests_->setGeneration(generation);
  if (announced_ > generation_) return false;
  recovering_.reset();
  requests_->refuse(std::nullopt);
  return true;
}

}  // namespace zps
