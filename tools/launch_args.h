// `zps launch`'s command line: what it accepts (kLaunchUsage), the parsed job shape (LaunchConfig)
// and how many processes each worker node runs. Pure functions of argv and the environment, so they
// can be tested without starting a job; tools/launch.cc runs the job they describe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "zps/status.h"

namespace zps {

// The job `zps launch` starts, as its arguments describe it. Filled by parseLaunchArgs.
struct LaunchConfig {
  int servers = 0;
  int workers = 0;
  int local_size = 0;  // processes per worker node; 0: from NVIDIA_VISIBLE_DEVICES, else 1
  std::string host = "127.0.0.1";
  int port = 0;  // 0: pick a free one
  double timeout_s = 0;
  double progress_s = -1;  // < 0: 1 s in a terminal, 30 s otherwise; 0: off
  std::vector<std::string> command;
  bool help = false;
};

// The most servers or workers one `zps launch` starts.
inline constexpr int kMaxLaunchRoleCount = 1000;

// The text `zps launch --help` prints (and a usage error prints after its one line).
extern const char kLaunchUsage[];

// argv[0] is "launch". -h/--help sets only `help`; otherwise --servers, --workers, '--' and a worker
// command are required, and a bad value is an InvalidArgument that names the flag and the value.
StatusOr<LaunchConfig> parseLaunchArgs(int argc, char** argv);

// --local-size, else one process per device listed in NVIDIA_VISIBLE_DEVICES (the container
// runtime's list of GPU indices or UUIDs; "all", "none" and "void" say nothing about the count).
int launchLocalSize(const LaunchConfig& config);

// One worker process of the job: its label in launch's output, the environment it gets on top of
// the job's, the variables removed from it, and its offset from ZPS_METRICS_PORT (the scheduler has
// 0 and server i 1 + i).
struct WorkerProcess {
  std::string label;  // "worker 1", or "worker 1.0" with local ranks
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> unset;
  int metrics_offset = 0;
};
WorkerProcess workerProcess(const LaunchConfig& config, int worker, int local_rank, int local_size);

}  // namespace zps
