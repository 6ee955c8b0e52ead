// Factory for the CUDA reducer. The header is plain C++ (no cuda_runtime.h), so host code can include it
// whether or not CUDA was built; without CUDA the factory returns kUnavailable with the reason.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/reducer.h"

namespace zps::kernels {

// True when this build has CUDA and a device can run its kernels; otherwise *why says what is
// missing. The check loads a kernel, which creates that device's context: `device` (which then
// becomes the calling thread's current device) names the one the caller will use, so that no
// process pays a context (hundreds of MiB) on a GPU it never uses; -1 means the current device.
bool cudaDeviceAvailable(std::string* why, int device = -1);

// The number of CUDA devices this process sees; 0 without CUDA, a driver or a device.
int cudaDeviceCount();

// The GPU that local rank `local_rank` of a worker node uses (zps train, the NCCL local reducer,
// zps check --gpu_tensors): local rank modulo the visible devices; -1 when there are none.
inline int gpuOfLocalRank(int local_rank) {
  const int devices = cudaDeviceCount();
  return devices > 0 ? local_rank % devices : -1;
}

// GPU memory for programs that keep tensors there (zps check --gpu_tensors): cudaMalloc on
// `device` (which also becomes the calling thread's current device), cudaFree, and a copy in any
// direction (cudaMemcpyDefault). Without CUDA they return kUnavailable / do nothing.
StatusOr<void*> deviceAlloc(int device, size_t bytes);
void deviceFree(void* p);
Status copyBytes(void* dst, const void* src, size_t bytes);

// A reducer that stages host buffers to device memory, sums there with a CUDA kernel and copies the result
// back. Fails with kUnavailable when the build lacks CUDA or no device is present.
StatusOr<std::unique_ptr<Reducer>> makeCudaReducer(int device);

}  // namespace zps::kernels
