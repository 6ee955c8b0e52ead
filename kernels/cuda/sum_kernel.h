// The CUDA sum kernel's launcher, shared by cuda_reducer.cc and cudaSumDevice. Private to
// kernels/cuda: it speaks cudaError_t, the callers turn that into Status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "zps/dtype.h"

namespace zps::kernels::cuda {

// Enqueues dst[i] += src[i] on `stream`. The caller has checked the dtype, that count * size does
// not overflow, and that both pointers are aligned to the element size. Returns the launch error,
// if any (cudaErrorInvalidValue for a dtype outside the enum).
cudaError_t launchSum(void* dst, const void* src, size_t count, DType dtype, cudaStream_t stream);

// Asks the runtime to load the kernel for the current device. Fails
// (cudaErrorNoKernelImageForDevice and friends) when this build has neither SASS nor PTX the device
// can run, which a device count alone would not reveal.
cudaError_t probeSumKernel();

}  // namespace zps::kernels::cuda
