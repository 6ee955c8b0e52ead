#include "tools/launch_children.h"

namespace zps {

int runningCount(const std::vector<Child>& children) {
  int n = 0;
  for (const auto& child : children) n += child.exit_code ? 0 : 1;
  return n;
}

std::string runningList(const std::vector<Child>& children) {
  std::string list;
  for (const auto& child : children) {
    if (child.exit_code) continue;
    if (!list.empty()) list += ", ";
    list += child.label + " (pid " + std::to_string(child.process->pid()) + ")";
  }
  return list;
}

int jobExitCode(JobEnd end, const std::vector<Child>& children, std::optional<size_t> first_failure, int stop_signal) {
  switch (end) {
    case JobEnd::kAllExited: return 0;
    case JobEnd::kSignal: return 128 + stop_signal;
    case JobEnd::kTimeout: return 124;
    case JobEnd::kNeverJoined:
      // Nothing failed when every worker ended on its own (none joined); a worker stopped while it
      // waited for the others to join did not get to run.
      for (const Child& child : children)
        if (child.stopped && child.label.starts_with("worker ")) return 1;
      return 0;
    case JobEnd::kChildFailed: {
      // A user error (exit 2) in any process wins over the failures it caused in the others (a worker
      // whose scheduler left exits 1), whichever exited first.
      for (const Child& child : children)
        if (!child.stopped && child.exit_code == 2) return 2;
      const int code = first_failure ? children[*first_failure].exit_code.value_or(1) : 1;
      return code > 0 ? code : 1;
    }
  }
  return 1;
}

}  // namespace zps
