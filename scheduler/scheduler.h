#pragma once

#include "ps/common/config.h"

namespace zps {

// Runs the scheduler role until the job ends. Returns the process exit code: 0 when every worker finished
// well, 1 when the job failed (rendezvous timeout, a dead node, a failed worker), 2 for a user error
// (the port cannot be bound).
int runScheduler(const Config& config);

}  // namespace zps
