#include "kernels/cuda/cuda_util.h"

#include <glog/logging.h>

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

Status DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::OK();
  // Free first: holding the old and the new allocation together could fail for no reason.
  release();
  ZPS_CUDA_RETURN_IF_ERROR(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
  return Status::OK();
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  const cudaError_t error = cudaFree(data_);
  // A destructor cannot return the error; a failed free means the context is already broken and
  // the next CUDA call will report that.
  LOG_IF(WARNING, error != cudaSuccess) << "cudaFree failed: " << cudaGetErrorString(error);
  data_ = nullptr;
  bytes_ = 0;
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
