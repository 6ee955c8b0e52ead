// Entry points of the zps subcommands. Each reads its own flags (ZPS_FLAG, tools/command_line.h, already
// parsed by main) and returns the process exit code.
#pragma once

namespace zps {

int checkMain();
int benchMain();
int trainMain();
int probeMain();                       // `zps probe`: is the scheduler's port accepting connections? (tools/probe.cc)
int statusMain();                      // `zps status` (tools/status.cc)
int traceMain(int argc, char** argv);  // `zps trace merge` (tools/trace_merge.cc)

}  // namespace zps
