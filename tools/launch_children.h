// The processes `zps launch` runs for one job (the scheduler, the servers, the workers), what became
// of each, and the exit code launch reports for the job from them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tools/launch_output.h"
#include "tools/process.h"

namespace zps {

// One child of the launcher and the state of its output stream; lives in Launcher::children_.
struct Child {
  std::string label;  // "scheduler", "server 0", "worker 1"
  std::unique_ptr<proc::Subprocess> process;
  LinePrefixer output;
  bool eof = false;
  std::optional<int> exit_code;
  bool stopped = false;  // launch sent it SIGTERM (its exit code is not a failure of its own)
};

// Why launch ended the job.
enum class JobEnd { kAllExited, kChildFailed, kSignal, kTimeout, kNeverJoined };

// The children that have not exited, and them as "worker 1 (pid 123), ..." for launch's lines.
int runningCount(const std::vector<Child>& children);
std::string runningList(const std::vector<Child>& children);

// launch's exit code once every child has exited: 0 when all ended on their own, 128 + the signal
// that stopped the job, 124 on --timeout, and for a failure the first failed child's code, where a
// user error (2) anywhere wins over the failures it caused. `first_failure` is set with kChildFailed.
int jobExitCode(JobEnd end, const std::vector<Child>& children, std::optional<size_t> first_failure, int stop_signal);

}  // namespace zps
