// Hooks into the CPU reducer for tests only. cpuSum picks hand-written AVX2/F16C loops for the
// 16-bit floats when the CPU has them, which would leave the portable loops (used on other CPUs)
// untested on a developer's machine; this entry point always takes the portable loops.
#pragma once

#include <cstddef>

#include "zps/dtype.h"

namespace zps::kernels::detail {

// cpuSum without the ISA-specific 16-bit float loops. Same contract as cpuSum.
void cpuSumPortable(void* dst, const void* src, size_t count, DType dtype);

}  // namespace zps::kernels::detail
