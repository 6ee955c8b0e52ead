// The end of a node's job among its local ranks: each rank reports how it ended, the root gathers
// the reports and publishes the job's exit code, and the others wait for it (worker/local/local_group.h).
#include <thread>

#include "worker/local/local_group.h"
#include "worker/local/local_group_control.h"

namespace zps {

using local_control::copyText;
using local_control::shared;

void LocalGroup::report(const Status& mine, const LocalTraffic& traffic) {
  auto& me = control_->reports[rank_];
  me.ok = mine.ok() ? 1 : 0;
  copyText(me.message, mine.message());
  me.traffic = traffic;
  shared(me.done).store(1, std::memory_order_release);
}

Status LocalGroup::gatherResults(const Status& mine, const LocalTraffic& traffic, std::chrono::milliseconds timeout,
                                 LocalTraffic* node_total) {
  report(mine, traffic);
  auto all_done = [&] {
    for (int r = 0; r < size_; ++r) {
      if (shared(control_->reports[r].done).load(std::memory_order_acquire) == 0) return false;
    }
    return true;
  };
  // A peer that dies after reporting is fine; one that dies before fails the node.
  Status waited = waitFor(all_done, "waiting for every local rank of this node to finish", timeout, Wait::kTimed);
  if (!waited.ok() && !all_done()) return waited;
  *node_total = LocalTraffic{};
  Status combined;
  for (int r = 0; r < size_; ++r) {
    const auto& rep = control_->reports[r];
    node_total->tensor_bytes_pushed += rep.traffic.tensor_bytes_pushed;
    node_total->network_bytes_pushed += rep.traffic.network_bytes_pushed;
    node_total->tensor_bytes_pulled += rep.traffic.tensor_bytes_pulled;
    node_total->network_bytes_pulled += rep.traffic.network_bytes_pulled;
    if (rep.ok == 0 && combined.ok()) {
      combined = InternalError("local rank " + std::to_string(r) + ": " + rep.message);
    }
  }
  return combined;
}

void LocalGroup::publishExit(int exit_code, const std::string& reason) {
  control_->exit_code = exit_code;
  copyText(control_->exit_reason, reason);
  shared(control_->exit_ready).store(1, std::memory_order_release);
}

int LocalGroup::waitExit(const Status& mine, const LocalTraffic& traffic, std::string* reason) {
  report(mine, traffic);
  // The job may run long after this rank is done (other nodes still train): wait while the root
  // lives. A dead root, or a dead peer whose death the root will report, ends the wait.
  bool slowed = false;
  Status waited = waitFor(
      [&] {
        const bool ready = shared(control_->exit_ready).load(std::memory_order_acquire) == 1;
        if (!ready && !slowed && slow_exit_.count() > 0) {
          // ZPS_TEST_LOCAL_SLOW_EXIT: widen the window between "not ended yet" and the liveness
          // check that follows, in which the root (and other peers) end the job and leave.
          slowed = true;
          std::this_thread::sleep_for(slow_exit_);
        }
        return ready;
      },
      "waiting for local rank 0 to end the job", std::chrono::milliseconds(0), Wait::kWhileRootLives);
  if (!waited.ok()) {
    *reason = waited.message();
    return 1;
  }
  *reason = control_->exit_reason;
  const int code = control_->exit_code;
  leave();
  return code;
}

void LocalGroup::leave() { shared(control_->left[rank_]).store(1, std::memory_order_release); }

}  // namespace zps
