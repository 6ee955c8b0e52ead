// What a process has cost so far, for `zps bench`: CPU time of all its threads and its peak resident
// memory. Linux only (both read zero elsewhere).
#pragma once

#include <cstdint>

namespace zps {

uint64_t processCpuNanos();
// VmHWM from /proc/self/status: the most resident memory the process ever had.
uint64_t peakRssBytes();

}  // namespace zps
