// Factory for the CUDA reducer. The header is plain C++ (no cuda_runtime.h), so host code can include it
// whether or not CUDA was built; without CUDA the factory returns kUnavailable with the reason.
#pragma once

#include <memory>
#include <string>

#include "kernels/reducer.h"

namespace zps::kernels {

// True when this build has CUDA and at least one device is usable; otherwise *why says what is missing.
bool cudaDeviceAvailable(std::string* why);

// The number of CUDA devices this process sees; 0 without CUDA, a driver or a device.
int cudaDeviceCount();

// A reducer that stages host buffers to device memory, sums there with a CUDA kernel and copies the result
// back. Fails with kUnavailable when the build lacks CUDA or no device is present.
StatusOr<std::unique_ptr<Reducer>> makeCudaReducer(int device);

}  // namespace zps::kernels
