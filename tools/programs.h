// Entry points of the zps subcommands that run as workers. Each reads its gflags (already parsed by
// main) and returns the process exit code.
#pragma once

namespace zps {

int checkMain();
int benchMain();
int trainMain();
int probeMain();  // `zps probe`: is the scheduler's port accepting connections? (tools/probe.cc)

}  // namespace zps
