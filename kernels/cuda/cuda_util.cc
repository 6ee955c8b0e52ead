#include "kernels/cuda/cuda_util.h"

#include <glog/logging.h>

#include "kernels/cuda_reducer.h"
#include "kernels/local_collectives.h"

namespace zps::kernels::cuda {

Status cudaErrorToStatus(cudaError_t error, const char* what, const char* file, int line) {
  std::string message = std::string(what) + " failed at " + file + ":" + std::to_string(line) +
                        ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
  switch (error) {
    // No device, no driver, or no kernel image for this device: the GPU is not there for us,
    // which callers treat as "fall back to the CPU", not as a bug.
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
      return Unavailable(std::move(message));
    default:
      return InternalError(std::move(message));
  }
}

template <MemoryKind kKind>
Status CudaMemory<kKind>::reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::OK();
  // Free first: holding the old and the new allocation together could fail for no reason.
  release();
  if constexpr (kKind == MemoryKind::kDevice) {
    ZPS_CUDA_RETURN_IF_ERROR(cudaMalloc(&data_, bytes));
  } else {
    ZPS_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&data_, bytes, cudaHostAllocPortable));
  }
  bytes_ = bytes;
  return Status::OK();
}

template <MemoryKind kKind>
void CudaMemory<kKind>::release() {
  if (data_ == nullptr) return;
  const cudaError_t error = kKind == MemoryKind::kDevice ? cudaFree(data_) : cudaFreeHost(data_);
  // A destructor cannot return the error; a failed free means the context is already broken and
  // the next CUDA call will report that.
  LOG_IF(WARNING, error != cudaSuccess) << "freeing CUDA memory failed: " << cudaGetErrorString(error);
  data_ = nullptr;
  bytes_ = 0;
}

template class CudaMemory<MemoryKind::kDevice>;
template class CudaMemory<MemoryKind::kPinnedHost>;

Status Event::create() {
  ZPS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  return Status::OK();
}

Event::~Event() {
  if (event_ != nullptr) static_cast<void>(cudaEventDestroy(event_));
}

Status Stream::create() {
  release();
  ZPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  return Status::OK();
}

void Stream::release() {
  if (stream_ == nullptr) return;
  const cudaError_t error = cudaStreamDestroy(stream_);
  LOG_IF(WARNING, error != cudaSuccess)
      << "cudaStreamDestroy failed: " << cudaGetErrorString(error);
  stream_ = nullptr;
}

}  // namespace zps::kernels::cuda

namespace zps::kernels {

StatusOr<void*> deviceAlloc(int device, size_t bytes) {
  ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  void* p = nullptr;
  ZPS_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  return p;
}

void deviceFree(void* p) {
  if (p != nullptr) static_cast<void>(cudaFree(p));
}

Status copyBytes(void* dst, const void* src, size_t bytes) {
  ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  return Status::OK();
}

bool isDevicePointer(const void* p) {
  // Asking once whether any device exists keeps CPU-only machines from paying a failed runtime
  // call per tensor.
  static const bool any_device = cudaDeviceCount() > 0;
  if (!any_device || p == nullptr) return false;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // clear it: the pointer is simply not CUDA's
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace zps::kernels
