#pragma once

#include "ps/common/config.h"

namespace zps {

// Runs the server role until the scheduler ends the job. Returns the exit code the scheduler asked for
// (0 when the job completed), 1 on failure, 2 on a user error (e.g. the port cannot be bound).
int runServer(const Config& config);

}  // namespace zps
