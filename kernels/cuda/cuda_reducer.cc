// The CUDA reducer (host side) and the device-pointer entry point. Built only with CUDA; the
// kernel itself lives in sum_kernel.cu.
#include "kernels/cuda_reducer.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_sum.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/sum_kernel.h"

namespace zps::kernels {
namespace {

// Host buffers are staged through at most this many device bytes per operand, so a reducer's
// device footprint stays bounded (2 x 64 MiB) however large the tensors get.
constexpr size_t kMaxStagingBytes = size_t{64} << 20;

Status checkSumArguments(size_t count, DType dtype, const char* who) {
  const size_t size = dtypeSize(dtype);
  if (size == 0) {
    return InvalidArgument(std::string(who) + ": unknown dtype value " +
                           std::to_string(static_cast<int>(dtype)));
  }
  if (count > std::numeric_limits<size_t>::max() / size) {
    return InvalidArgument(std::string(who) + ": " + std::to_string(count) +
                           " elements overflow size_t bytes");
  }
  return Status::OK();
}

// Selects `device` and checks that the runtime can run our kernel on it.
Status useDevice(int device) {
  int count = 0;
  ZPS_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return InvalidArgument("CUDA device " + std::to_string(device) + " requested but " +
                           std::to_string(count) + " device(s) are present");
  }
  ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ZPS_CUDA_RETURN_IF_ERROR(cuda::probeSumKernel());
  return Status::OK();
}

// Sums host buffers on one GPU: copies both operands to grow-only device buffers, runs the sum
// kernel and copies dst back, all on the reducer's own stream. Owned by one server engine thread
// (it is not thread-safe) and lives as long as that engine; it makes its device current on every
// call because the calling thread may have switched devices in between.
class CudaReducer final : public Reducer {
 public:
  CudaReducer(int device, cuda::Stream stream) : device_(device), stream_(std::move(stream)) {}

  // The members free their stream and buffers as they go; make their device current first. The
  // error is ignored: a destructor cannot report it, and the frees log their own failures.
  ~CudaReducer() override { static_cast<void>(cudaSetDevice(device_)); }

  const char* name() const override { return "cuda"; }

  Status sum(void* dst, const void* src, size_t count, DType dtype) override {
    ZPS_RETURN_IF_ERROR(checkSumArguments(count, dtype, "cuda reducer"));
    if (count == 0) return Status::OK();
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const Status enqueued = enqueue(static_cast<char*>(dst), static_cast<const char*>(src), count,
                                    dtypeSize(dtype), dtype);
    // Always drain the stream, even after an error, so no copy can touch the caller's buffers
    // after we return.
    const cudaError_t drained = cudaStreamSynchronize(stream_.get());
    ZPS_RETURN_IF_ERROR(enqueued);
    if (drained != cudaSuccess) {
      return cuda::cudaErrorToStatus(drained, "cudaStreamSynchronize", __FILE__, __LINE__);
    }
    return Status::OK();
  }

 private:
  Status enqueue(char* dst, const char* src, size_t count, size_t size, DType dtype) {
    const size_t total_bytes = count * size;
    const size_t chunk_elements = kMaxStagingBytes / size;
    const size_t staging_bytes =
        total_bytes < kMaxStagingBytes ? total_bytes : chunk_elements * size;
    ZPS_RETURN_IF_ERROR(dst_staging_.reserve(staging_bytes));
    ZPS_RETURN_IF_ERROR(src_staging_.reserve(staging_bytes));
    cudaStream_t stream = stream_.get();
    for (size_t first = 0; first < count; first += chunk_elements) {
      const size_t n = count - first < chunk_elements ? count - first : chunk_elements;
      const size_t offset = first * size;
      const size_t bytes = n * size;
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst_staging_.data(), dst + offset, bytes,
                                               cudaMemcpyHostToDevice, stream));
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(src_staging_.data(), src + offset, bytes,
                                               cudaMemcpyHostToDevice, stream));
      ZPS_CUDA_RETURN_IF_ERROR(
          cuda::launchSum(dst_staging_.data(), src_staging_.data(), n, dtype, stream));
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + offset, dst_staging_.data(), bytes,
                                               cudaMemcpyDeviceToHost, stream));
    }
    return Status::OK();
  }

  const int device_;
  cuda::Stream stream_;
  cuda::DeviceBuffer dst_staging_;
  cuda::DeviceBuffer src_staging_;
};

}  // namespace

bool cudaDeviceAvailable(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  std::string reason;
  if (error != cudaSuccess) {
    reason = std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(error) +
             ": " + cudaGetErrorString(error);
    // The runtime says "insufficient" also when there is no driver at all, the common case.
    if (error == cudaErrorInsufficientDriver) {
      reason += " (no NVIDIA driver is loaded, or it is older than this CUDA runtime)";
    }
  } else if (count == 0) {
    reason = "no CUDA device found";
  } else {
    int device = 0;
    cudaError_t probed = cudaGetDevice(&device);
    if (probed == cudaSuccess) probed = cuda::probeSumKernel();
    if (probed != cudaSuccess) {
      reason = "CUDA device " + std::to_string(device) +
               " cannot run this build's kernels: " + cudaGetErrorName(probed) + ": " +
               cudaGetErrorString(probed);
    }
  }
  if (reason.empty()) return true;
  if (why != nullptr) *why = std::move(reason);
  return false;
}

int cudaDeviceCount() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

StatusOr<std::unique_ptr<Reducer>> makeCudaReducer(int device) {
  const Status selected = useDevice(device);
  if (!selected.ok()) return selected.withContext("creating the CUDA reducer");
  cuda::Stream stream;
  ZPS_RETURN_IF_ERROR(stream.create());
  return std::unique_ptr<Reducer>(std::make_unique<CudaReducer>(device, std::move(stream)));
}

Status cudaSumDevice(void* dst, const void* src, size_t count, DType dtype, void* stream) {
  ZPS_RETURN_IF_ERROR(checkSumArguments(count, dtype, "cudaSumDevice"));
  const size_t size = dtypeSize(dtype);
  if (reinterpret_cast<uintptr_t>(dst) % size != 0 ||
      reinterpret_cast<uintptr_t>(src) % size != 0) {
    return InvalidArgument("cudaSumDevice: " + std::string(dtypeName(dtype)) +
                           " pointers must be aligned to " + std::to_string(size) + " bytes");
  }
  ZPS_CUDA_RETURN_IF_ERROR(
      cuda::launchSum(dst, src, count, dtype, static_cast<cudaStream_t>(stream)));
  return Status::OK();
}

}  // namespace zps::kernels
