// What this process can do on a GPU, for `zps version --gpu`: how the build was made (CUDA runtime,
// GPU code, NCCL headers), the driver, each device and whether it runs this build's kernels, and
// where cuBLAS and NCCL load from. The answer a user needs first when a job does not use the GPU.
#pragma once

#include <string>

namespace zps::kernels {

struct GpuReport {
  std::string text;     // one line per item, ready to print
  bool usable = false;  // some device runs this build's kernels and cuBLAS loads
};

// Probing a device loads a kernel there, so it creates that device's context (a diagnostic may).
GpuReport gpuReport();

}  // namespace zps::kernels
