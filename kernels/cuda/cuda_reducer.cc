// The CUDA reducer (host side) and the device-pointer entry point. Built only with CUDA; the
// kernel itself lives in sum_kernel.cu.
#include "kernels/cuda_reducer.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_sum.h"
#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/sum_kernel.h"
#include "kernels/cuda_optimizer.h"

namespace zps::kernels {
namespace {

// Host buffers are staged through at most this many device bytes per operand, so a reducer's
// device footprint stays bounded (2 x 64 MiB) however large the tensors get.
constexpr size_t kMaxStagingBytes = size_t{64} << 20;

Status checkSumArguments(size_t count, DType dtype, const char* who) {
  const size_t size = dtypeSize(dtype);
  if (size == 0) {
    return InvalidArgument(std::string(who) + ": unknown dtype value " + std::to_string(static_cast<int>(dtype)));
  }
  if (count > std::numeric_limits<size_t>::max() / size) {
    return InvalidArgument(std::string(who) + ": " + std::to_string(count) + " elements overflow size_t bytes");
  }
  return Status::OK();
}

// Selects `device` and checks that the runtime can run our kernel on it.
Status useDevice(int device) {
  int count = 0;
  ZPS_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    return InvalidArgument("CUDA device " + std::to_string(device) + " requested but " + std::to_string(count) +
                           " device(s) are present");
  }
  ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ZPS_CUDA_RETURN_IF_ERROR(cuda::probeSumKernel());
  return Status::OK();
}

// Streams per reducer for round accumulation: rounds of different keys go to different streams,
// so one key's host-to-device copy overlaps another's sum.
constexpr int kStreams = 4;

// Sums on one GPU, for one server engine thread (not thread-safe; lives as long as the engine). It
// makes its device current on every call because the calling thread may have switched devices.
//
// sum() (async keys) stages both host operands to the device and copies the result back at once.
// Rounds (start/add/collect) keep the key's running sum on the device from the first push to the
// last: each push is copied into pinned host memory (a CPU memcpy), copied to the device
// asynchronously on the round's stream and added there; only collect() waits, for that stream, and
// copies the sum back. Device sums are pooled by size, so steady-state rounds allocate nothing.
class CudaReducer final : public Reducer {
 public:
  CudaReducer(int device, std::vector<cuda::Stream> streams, std::vector<cuda::Event> events)
      : device_(device),
        streams_(std::move(streams)),
        events_(std::move(events)),
        pinned_(streams_.size()),
        incoming_(streams_.size()) {}

  // The members free their streams and buffers as they go; make their device current first. The
  // error is ignored: a destructor cannot report it, and the frees log their own failures.
  ~CudaReducer() override { static_cast<void>(cudaSetDevice(device_)); }

  const char* name() const override { return "cuda"; }

  Status sum(void* dst, const void* src, size_t count, DType dtype) override {
    ZPS_RETURN_IF_ERROR(checkSumArguments(count, dtype, "cuda reducer"));
    if (count == 0) return Status::OK();
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const Status enqueued =
        enqueue(static_cast<char*>(dst), static_cast<const char*>(src), count, dtypeSize(dtype), dtype);
    // Always drain the stream, even after an error, so no copy can touch the caller's buffers
    // after we return.
    const cudaError_t drained = cudaStreamSynchronize(streams_[0].get());
    ZPS_RETURN_IF_ERROR(enqueued);
    if (drained != cudaSuccess) {
      return cuda::cudaErrorToStatus(drained, "cudaStreamSynchronize", __FILE__, __LINE__);
    }
    return Status::OK();
  }

  bool holdsRounds() const override { return true; }

  Status start(void* dst, const void* src, size_t count, DType dtype) override {
    ZPS_RETURN_IF_ERROR(checkSumArguments(count, dtype, "cuda reducer"));
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const size_t bytes = count * dtypeSize(dtype);
    auto [it, fresh] = rounds_.try_emplace(dst);
    Round& round = it->second;
    // A round started again before it was collected (its first start failed part way) may still
    // have work queued on its old stream, which must not overlap the new stream's.
    if (!fresh) ZPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(streams_[round.stream].get()));
    round.bytes = bytes;
    round.stream = next_stream_++ % static_cast<int>(streams_.size());
    if (round.sum.bytes() < bytes) {
      auto pooled = pool_.find(bytes);
      if (pooled != pool_.end()) {
        round.sum = std::move(pooled->second);
        pool_.erase(pooled);
      }
      ZPS_RETURN_IF_ERROR(round.sum.reserve(bytes));
    }
    return stage(round.stream, src, bytes, round.sum.data());
  }

  Status add(void* dst, const void* src, size_t count, DType dtype) override {
    auto it = rounds_.find(dst);
    if (it == rounds_.end()) return InternalError("cuda reducer: add() for a round that was never started");
    Round& round = it->second;
    if (count * dtypeSize(dtype) != round.bytes) return InternalError("cuda reducer: add() of a different size");
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    const int s = round.stream;
    // Growing frees the old buffer, which a sum queued on this stream may still read (cudaFree
    // only "may" wait for it).
    if (incoming_[s].bytes() < round.bytes) ZPS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(streams_[s].get()));
    ZPS_RETURN_IF_ERROR(incoming_[s].reserve(round.bytes));
    ZPS_RETURN_IF_ERROR(stage(s, src, round.bytes, incoming_[s].data()));
    // Stream order: the next push staged on this stream overwrites incoming_[s] only after this sum.
    ZPS_CUDA_RETURN_IF_ERROR(cuda::launchSum(round.sum.data(), incoming_[s].data(), count, dtype, streams_[s].get()));
    return Status::OK();
  }

  Status collect(void* dst) override {
    auto it = rounds_.find(dst);
    if (it == rounds_.end()) return InternalError("cuda reducer: collect() for a round that was never started");
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    Round& round = it->second;
    cudaStream_t stream = streams_[round.stream].get();
    const cudaError_t copied =
        round.bytes == 0 ? cudaSuccess
                         : cudaMemcpyAsync(dst, round.sum.data(), round.bytes, cudaMemcpyDeviceToHost, stream);
    const cudaError_t drained = cudaStreamSynchronize(stream);
    // Back to the pool by size (one per size is plenty: a round's device sum is reused as soon as
    // the next round of any key of that size starts).
    pool_.emplace(round.bytes, std::move(round.sum));
    rounds_.erase(it);
    if (copied != cudaSuccess)
      return cuda::cudaErrorToStatus(copied, "cudaMemcpyAsync (device to host)", __FILE__, __LINE__);
    if (drained != cudaSuccess) return cuda::cudaErrorToStatus(drained, "cudaStreamSynchronize", __FILE__, __LINE__);
    return Status::OK();
  }

  Status applyRows(const OptimizerConfig& config, uint32_t dim, size_t rows, const uint32_t* slots,
                   const uint64_t* steps, const float* grads, float* values, float* state) override {
    if (rows == 0 || dim == 0) return Status::OK();
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    // One pinned block, one copy each way: [values | state | grads | adam factors 1 | factors 2],
    // rows gathered from their table slots in order.
    const size_t state_floats = optimizerStateFloats(config.kind) * dim;
    const size_t corrections = config.kind == OptimizerKind::kAdam ? rows : 0;
    const size_t values_floats = rows * dim;
    const size_t updated_floats = values_floats + rows * state_floats;  // what comes back
    const size_t total_floats = updated_floats + rows * dim + 2 * corrections;
    ZPS_RETURN_IF_ERROR(rows_host_.reserve(total_floats * sizeof(float)));
    ZPS_RETURN_IF_ERROR(rows_device_.reserve(total_floats * sizeof(float)));
    auto* host = static_cast<float*>(rows_host_.data());
    float* host_state = host + values_floats;
    float* host_grads = host + updated_floats;
    float* host_bc1 = host_grads + rows * dim;
    float* host_bc2 = host_bc1 + corrections;
    for (size_t i = 0; i < rows; ++i) {
      std::memcpy(host + i * dim, values + size_t{slots[i]} * dim, dim * sizeof(float));
      if (state_floats > 0) {  // sgd has no state, and its table may pass a null one
        std::memcpy(host_state + i * state_floats, state + size_t{slots[i]} * state_floats,
                    state_floats * sizeof(float));
      }
      if (corrections > 0) adamCorrections(config, steps[i], host_bc1 + i, host_bc2 + i);
    }
    std::memcpy(host_grads, grads, rows * dim * sizeof(float));
    cudaStream_t stream = streams_[0].get();
    const Status enqueued =
        enqueueRows(config, rows, dim, values_floats, updated_floats, total_floats, corrections, stream);
    // Drain even after an error: the next call rewrites rows_host_, which a copy may still read.
    const cudaError_t drained = cudaStreamSynchronize(stream);
    ZPS_RETURN_IF_ERROR(enqueued);
    if (drained != cudaSuccess) {
      return cuda::cudaErrorToStatus(drained, "cudaStreamSynchronize", __FILE__, __LINE__);
    }
    // Only now, with every step done, do the table's rows change.
    for (size_t i = 0; i < rows; ++i) {
      std::memcpy(values + size_t{slots[i]} * dim, host + i * dim, dim * sizeof(float));
      if (state_floats > 0) {
        std::memcpy(state + size_t{slots[i]} * state_floats, host_state + i * state_floats,
                    state_floats * sizeof(float));
      }
    }
    return Status::OK();
  }

  void discard(void* dst) override {
    auto it = rounds_.find(dst);
    if (it == rounds_.end()) return;
    // The stream may still be adding into the sum: let it finish before the sum is reused.
    static_cast<void>(cudaSetDevice(device_));
    static_cast<void>(cudaStreamSynchronize(streams_[it->second.stream].get()));
    pool_.emplace(it->second.bytes, std::move(it->second.sum));
    rounds_.erase(it);
  }

 private:
  struct Round {
    cuda::DeviceBuffer sum;
    size_t bytes = 0;
    int stream = 0;
  };

  // applyRows' device half: the gathered rows up, one kernel, the updated rows down, on `stream`.
  Status enqueueRows(const OptimizerConfig& config, size_t rows, size_t dim, size_t values_floats,
                     size_t updated_floats, size_t total_floats, size_t corrections, cudaStream_t stream) {
    auto* host = static_cast<float*>(rows_host_.data());
    auto* device = static_cast<float*>(rows_device_.data());
    ZPS_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(device, host, total_floats * sizeof(float), cudaMemcpyHostToDevice, stream));
    float* device_bc1 = device + updated_floats + rows * dim;
    ZPS_RETURN_IF_ERROR(cudaApplyOptimizerRows(config, device, device + values_floats, device + updated_floats, rows,
                                               dim, corrections > 0 ? device_bc1 : nullptr,
                                               corrections > 0 ? device_bc1 + corrections : nullptr, stream));
    ZPS_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host, device, updated_floats * sizeof(float), cudaMemcpyDeviceToHost, stream));
    return Status::OK();
  }

  // Copies host bytes to `device_dst` on stream s through that stream's pinned buffer. The CPU copy
  // waits only for the previous transfer out of the same pinned buffer.
  Status stage(int s, const void* src, size_t bytes, void* device_dst) {
    if (bytes == 0) return Status::OK();  // a zero-length key: nothing to copy (and no buffers)
    ZPS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events_[s].get()));
    ZPS_RETURN_IF_ERROR(pinned_[s].reserve(bytes));
    std::memcpy(pinned_[s].data(), src, bytes);
    cudaStream_t stream = streams_[s].get();
    ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device_dst, pinned_[s].data(), bytes, cudaMemcpyHostToDevice, stream));
    ZPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(events_[s].get(), stream));
    return Status::OK();
  }

  Status enqueue(char* dst, const char* src, size_t count, size_t size, DType dtype) {
    const size_t total_bytes = count * size;
    const size_t chunk_elements = kMaxStagingBytes / size;
    const size_t staging_bytes = total_bytes < kMaxStagingBytes ? total_bytes : chunk_elements * size;
    ZPS_RETURN_IF_ERROR(dst_staging_.reserve(staging_bytes));
    ZPS_RETURN_IF_ERROR(src_staging_.reserve(staging_bytes));
    cudaStream_t stream = streams_[0].get();
    for (size_t first = 0; first < count; first += chunk_elements) {
      const size_t n = count - first < chunk_elements ? count - first : chunk_elements;
      const size_t offset = first * size;
      const size_t bytes = n * size;
      ZPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst_staging_.data(), dst + offset, bytes, cudaMemcpyHostToDevice, stream));
      ZPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(src_staging_.data(), src + offset, bytes, cudaMemcpyHostToDevice, stream));
      ZPS_CUDA_RETURN_IF_ERROR(cuda::launchSum(dst_staging_.data(), src_staging_.data(), n, dtype, stream));
      ZPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(dst + offset, dst_staging_.data(), bytes, cudaMemcpyDeviceToHost, stream));
    }
    return Status::OK();
  }

  const int device_;
  std::vector<cuda::Stream> streams_;
  std::vector<cuda::Event> events_;           // per stream: its pinned buffer's last copy is done
  std::vector<cuda::PinnedBuffer> pinned_;    // per stream: pushes staged for the device
  std::vector<cuda::DeviceBuffer> incoming_;  // per stream: a push on the device, before its sum
  std::unordered_map<void*, Round> rounds_;   // by the host buffer the round will be collected into
  std::unordered_multimap<size_t, cuda::DeviceBuffer> pool_;
  int next_stream_ = 0;
  cuda::DeviceBuffer dst_staging_;
  cuda::DeviceBuffer src_staging_;
  cuda::PinnedBuffer rows_host_;  // param mode: a round's rows, gathered
  cuda::DeviceBuffer rows_device_;
};

}  // namespace

bool cudaDeviceAvailable(std::string* why, int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  std::string reason;
  if (error != cudaSuccess) {
    reason = std::string("no usable CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(error) + ": " +
             cudaGetErrorString(error);
    // The runtime says "insufficient" also when there is no driver at all, the common case.
    if (error == cudaErrorInsufficientDriver) {
      reason += " (no NVIDIA driver is loaded, or it is older than this CUDA runtime)";
    }
  } else if (count == 0) {
    reason = "no CUDA device found";
  } else if (device >= count) {
    reason =
        "CUDA device " + std::to_string(device) + " requested but " + std::to_string(count) + " device(s) are present";
  } else {
    cudaError_t probed = device < 0 ? cudaGetDevice(&device) : cudaSetDevice(device);
    if (probed == cudaSuccess) probed = cuda::probeSumKernel();
    if (probed != cudaSuccess) {
      reason = "CUDA device " + std::to_string(device) +
               " cannot run this build's kernels: " + cudaGetErrorName(probed) + ": " + cudaGetErrorString(probed);
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
  std::vector<cuda::Stream> streams(kStreams);
  std::vector<cuda::Event> events(kStreams);
  for (int i = 0; i < kStreams; ++i) {
    ZPS_RETURN_IF_ERROR(streams[i].create());
    ZPS_RETURN_IF_ERROR(events[i].create());
  }
  return std::unique_ptr<Reducer>(std::make_unique<CudaReducer>(device, std::move(streams), std::move(events)));
}

Status cudaSumDevice(void* dst, const void* src, size_t count, DType dtype, void* stream) {
  ZPS_RETURN_IF_ERROR(checkSumArguments(count, dtype, "cudaSumDevice"));
  const size_t size = dtypeSize(dtype);
  if (reinterpret_cast<uintptr_t>(dst) % size != 0 || reinterpret_cast<uintptr_t>(src) % size != 0) {
    return InvalidArgument("cudaSumDevice: " + std::string(dtypeName(dtype)) + " pointers must be aligned to " +
                           std::to_string(size) + " bytes");
  }
  ZPS_CUDA_RETURN_IF_ERROR(cuda::launchSum(dst, src, count, dtype, static_cast<cudaStream_t>(stream)));
  return Status::OK();
}

}  // namespace zps::kernels
