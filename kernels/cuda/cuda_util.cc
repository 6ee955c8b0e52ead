#include "kernels/cuda/cuda_util.h"

#include <glog/logging.h>

#include <atomic>

#include "kernels/cuda/gpu_libraries.h"
#include "kernels/cuda_reducer.h"
#include "kernels/local_collectives.h"

namespace zps::kernels::cuda {

Status cudaErrorToStatus(cudaError_t error, const char* what, const char* file, int line) {
  std::string message = std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " +
                        cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
  switch (error) {
    // No device, no driver, or no kernel image for this device: the GPU is not there for us,
    // which callers treat as "fall back to the CPU", not as a bug.
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice: return Unavailable(std::move(message));
    default: return InternalError(std::move(message));
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
  release();
  ZPS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  return Status::OK();
}

void Event::release() {
  if (event_ == nullptr) return;
  const cudaError_t error = cudaEventDestroy(event_);
  LOG_IF(WARNING, error != cudaSuccess) << "cudaEventDestroy failed: " << cudaGetErrorString(error);
  event_ = nullptr;
}

Status Stream::create() {
  release();
  ZPS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  return Status::OK();
}

void Stream::release() {
  if (stream_ == nullptr) return;
  const cudaError_t error = cudaStreamDestroy(stream_);
  LOG_IF(WARNING, error != cudaSuccess) << "cudaStreamDestroy failed: " << cudaGetErrorString(error);
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
  if (bytes == 0) return Status::OK();
  ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  // cudaMemcpy from pageable host memory returns once the bytes are staged, possibly before they
  // reach the device; callers hand the device buffer to other streams next, so wait for it.
  ZPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(cudaStreamLegacy));
  return Status::OK();
}

namespace {

// Whether this process may hold CUDA allocations, asked without creating a context: any runtime
// call such as cudaPointerGetAttributes would create one on the calling thread's device (hundreds
// of MiB of device memory and a second of start-up in every worker of a host-only job). Device
// memory exists only in a context, so with no current context on this thread and no active
// primary context on any device there is none. Once a context is seen the answer stays yes.
// "Cannot tell" (the driver's entry points are missing or fail) counts as yes, so a real device
// pointer is never mistaken for host memory.
bool mayHoldDeviceMemory(int devices) {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return true;
  auto driver = cuda::driverLibrary();
  if (!driver.ok()) return true;
  const cuda::DriverLibrary& d = **driver;
  bool any = false;
  CUcontext current = nullptr;
  if (d.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != nullptr) any = true;
  for (int i = 0; i < devices && !any; ++i) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (d.cuDeviceGet(&device, i) != CUDA_SUCCESS ||
        d.cuDevicePrimaryCtxGetState(device, &flags, &active) != CUDA_SUCCESS || active != 0) {
      any = true;
    }
  }
  if (any) seen.store(true, std::memory_order_relaxed);
  return any;
}

}  // namespace

bool isDevicePointer(const void* p) {
  // Asking once whether any device exists keeps CPU-only machines (no driver included: the
  // count is then 0) from paying a failed runtime call per tensor. cudaGetDeviceCount makes no
  // context.
  static const int devices = cudaDeviceCount();
  if (devices == 0 || p == nullptr || !mayHoldDeviceMemory(devices)) return false;
  cudaPointerAttributes attributes{};
  // Unregistered host memory is a success with type cudaMemoryTypeUnregistered (CUDA 11 and
  // later); an error means the same for our purpose.
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // clear it: the pointer is simply not CUDA's
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

}  // namespace zps::kernels
