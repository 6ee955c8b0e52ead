// Device-pointer sum for code that already keeps tensors on the GPU (the server's CUDA engine).
// Plain C++: the stream travels as an opaque pointer so includers need no CUDA headers. Without
// CUDA in the build, cudaSumDevice returns kUnavailable (kernels/cuda_stub.cc).
#pragma once

#include <cstddef>

#include "zps/dtype.h"
#include "zps/status.h"

namespace zps::kernels {

// Enqueues dst[i] += src[i] for i in [0, count) on `stream` (a cudaStream_t; nullptr means the
// legacy default stream) and returns without waiting; the caller synchronises the stream before it
// reads dst. Both pointers must be device memory of the current device and aligned to the dtype's
// size; the kernel uses 16-byte loads when dst and src share their offset modulo 16. Returns
// kInvalidArgument for misaligned pointers or a bad dtype, kInternal for a failed launch.
Status cudaSumDevice(void* dst, const void* src, size_t count, DType dtype, void* stream);

}  // namespace zps::kernels
