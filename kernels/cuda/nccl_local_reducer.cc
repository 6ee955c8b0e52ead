// The NCCL local reducer (kernels/local_collectives.h). Built only with CUDA and NCCL.
//
// The communicator is non-blocking (ncclConfig_t::blocking = 0): NCCL calls return at once, maybe
// with ncclInProgress, and this file polls for completion itself. That is what lets every wait have
// a deadline and notice a dead local peer: a blocking communicator would hang in ncclCommInitRank
// or in a collective until the process is killed.
#include <nccl.h>

#include <cstring>
#include <thread>
#include <unordered_map>
#include <utility>

#include "kernels/cuda/cuda_util.h"
#include "kernels/cuda/gpu_libraries.h"
#include "kernels/cuda_reducer.h"
#include "kernels/local_collectives.h"

namespace zps::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// NCCL as loaded by the two entry points at the bottom, the only ways into this file: everything
// else runs after the load succeeded (with one local rank nothing calls NCCL, nor this).
const cuda::NcclLibrary& nccl() { return *cuda::ncclLibrary().value(); }

// How often waits ask KeepWaiting (a few syscalls for the shared-memory liveness locks).
constexpr auto kHealthInterval = std::chrono::milliseconds(20);

Status ncclErrorToStatus(ncclResult_t result, const char* what, const char* file, int line, ncclComm_t comm) {
  std::string message =
      std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " + nccl().ncclGetErrorString(result);
  const char* last = nccl().ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') message += " (" + std::string(last) + ")";
  // Invalid usage (for instance two local ranks on one GPU) is the caller's setup, not a bug.
  if (result == ncclInvalidUsage || result == ncclInvalidArgument) return FailedPrecondition(std::move(message));
  return InternalError(std::move(message));
}

StatusOr<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat64: return ncclFloat64;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kUInt8: return ncclUint8;
  }
  return InvalidArgument("NCCL local reducer: unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

// Owns one communicator. Destruction aborts it: every operation we issued has completed or failed
// by then, and abort, unlike destroy, never waits for peers that may be gone. ncclCommAbort is
// synchronous even on a non-blocking communicator: it marks the communicator as being destroyed,
// and NCCL runs the group of a communicator being destroyed as a blocking group on the calling
// thread (src/group.cc, ncclAsyncLaunch: `if (comm->destroyFlag) ncclGroupBlocking = 1`), so it
// never returns ncclInProgress and, once it returns, NCCL has let go of our buffers and stream.
// Its result is ignored: there is nothing left to do with a communicator that failed to abort.
// It must not be called inside an open NCCL group (see group() below).
class Communicator {
 public:
  Communicator() = default;
  ~Communicator() {
    if (comm_ != nullptr) static_cast<void>(nccl().ncclCommAbort(comm_));
  }
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t* out() { return &comm_; }
  ncclComm_t get() const { return comm_; }
  // After a failure the communicator is unusable; abort it now so peers blocked in it fail too.
  void abort() {
    if (comm_ != nullptr) static_cast<void>(nccl().ncclCommAbort(comm_));
    comm_ = nullptr;
  }

 private:
  ncclComm_t comm_ = nullptr;
};

class NcclLocalReducer final : public DeviceLocalReducer {
 public:
  NcclLocalReducer(int rank, int size, int device, std::chrono::milliseconds timeout, KeepWaiting keep_waiting)
      : rank_(rank), size_(size), device_(device), timeout_(timeout), keep_waiting_(std::move(keep_waiting)) {}
  ~NcclLocalReducer() override { static_cast<void>(cudaSetDevice(device_)); }

  Status init(const std::string& unique_id) {
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ZPS_RETURN_IF_ERROR(stream_.create());
    ZPS_RETURN_IF_ERROR(callers_work_.create());
    if (size_ == 1) return Status::OK();
    ncclUniqueId id;
    if (unique_id.size() != sizeof(id.internal)) {
      return InvalidArgument("NCCL unique id of " + std::to_string(unique_id.size()) + " bytes; expected " +
                             std::to_string(sizeof(id.internal)));
    }
    std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ZPS_RETURN_IF_ERROR(call(nccl().ncclCommInitRankConfig(comm_.out(), size_, id, rank_, &config),
                             "ncclCommInitRankConfig", __FILE__, __LINE__));
    return Status::OK();
  }

  StatusOr<uint8_t*> staging(int tensor_id, size_t bytes) override {
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ZPS_RETURN_IF_ERROR(staging_[tensor_id].reserve(bytes));
    return staging_[tensor_id].bytePtr();
  }

  Status reduceScatter(const void* in, size_t bytes, DType dtype, const std::vector<LocalPiece>& pieces,
                       uint8_t* staging) override {
    if (bytes == 0) return usable();  // every rank has the same tensor: none calls NCCL
    ZPS_ASSIGN_OR_RETURN(ncclDataType_t type, begin(bytes, dtype));
    const size_t esize = dtypeSize(dtype);
    cudaStream_t s = stream_.get();
    if (size_ == 1) {
      // Nothing to reduce: the tensor goes straight to pinned staging, from the device or the host.
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(staging, in, bytes, cudaMemcpyDefault, s));
      return drain("copying the tensor to pinned staging");
    }
    // NCCL reads device memory; a host tensor is copied over first.
    const uint8_t* src = static_cast<const uint8_t*>(in);
    if (!isDevicePointer(in)) {
      ZPS_RETURN_IF_ERROR(input_.reserve(bytes));
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(input_.data(), in, bytes, cudaMemcpyHostToDevice, s));
      src = input_.bytePtr();
    }
    uint8_t* result = result_.bytePtr();
    ZPS_RETURN_IF_ERROR(group([&]() -> Status {
      for (const CollectiveStep& step : planLocalCollectives(pieces, size_)) {
        const size_t count = step.piece_bytes / esize;
        if (step.whole_partition) {
          ZPS_RETURN_IF_ERROR(
              queued(nccl().ncclReduceScatter(src + step.offset, result + step.offset + step.piece_bytes * rank_, count,
                                              type, ncclSum, comm_.get(), s),
                     "ncclReduceScatter", __FILE__, __LINE__));
        } else {
          ZPS_RETURN_IF_ERROR(queued(nccl().ncclReduce(src + step.offset, result + step.offset, count, type, ncclSum,
                                                       step.owner, comm_.get(), s),
                                     "ncclReduce", __FILE__, __LINE__));
        }
      }
      return Status::OK();
    }));
    for (const LocalPiece& p : pieces) {
      if (p.owner != rank_) continue;
      ZPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(staging + p.offset, result + p.offset, p.bytes, cudaMemcpyDeviceToHost, s));
    }
    return drain("NCCL reduce-scatter");
  }

  Status allGather(const uint8_t* staging, size_t bytes, DType dtype, const std::vector<LocalPiece>& pieces,
                   void* out) override {
    if (bytes == 0) return usable();
    ZPS_ASSIGN_OR_RETURN(ncclDataType_t type, begin(bytes, dtype));
    const size_t esize = dtypeSize(dtype);
    cudaStream_t s = stream_.get();
    if (size_ == 1) {
      // Staging holds the whole sum already: straight out, to the device or the host.
      ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, staging, bytes, cudaMemcpyDefault, s));
      return drain("copying the pulled tensor out of pinned staging");
    }
    uint8_t* result = result_.bytePtr();
    for (const LocalPiece& p : pieces) {
      if (p.owner != rank_) continue;
      ZPS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(result + p.offset, staging + p.offset, p.bytes, cudaMemcpyHostToDevice, s));
    }
    ZPS_RETURN_IF_ERROR(group([&]() -> Status {
      for (const CollectiveStep& step : planLocalCollectives(pieces, size_)) {
        const size_t count = step.piece_bytes / esize;
        if (step.whole_partition) {
          // In place: our piece already sits at its slot of the partition.
          ZPS_RETURN_IF_ERROR(queued(nccl().ncclAllGather(result + step.offset + step.piece_bytes * rank_,
                                                          result + step.offset, count, type, comm_.get(), s),
                                     "ncclAllGather", __FILE__, __LINE__));
        } else {
          ZPS_RETURN_IF_ERROR(queued(
              nccl().ncclBroadcast(result + step.offset, result + step.offset, count, type, step.owner, comm_.get(), s),
              "ncclBroadcast", __FILE__, __LINE__));
        }
      }
      return Status::OK();
    }));
    // Wait here, with the deadline and the health checks: a copy into pageable host memory
    // (a host `out`) may block this thread until the stream is idle, so queued behind a
    // collective that waits for a dead peer it would hang past every deadline.
    ZPS_RETURN_IF_ERROR(drain("NCCL all-gather"));
    ZPS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, result, bytes, cudaMemcpyDefault, s));
    return drain("copying the gathered tensor out");
  }

 private:
  Status usable() const {
    if (!failed_.ok()) return failed_.withContext("the node's NCCL communicator failed earlier");
    return Status::OK();
  }

  // What both halves start with: a communicator that has not failed, NCCL's type for the dtype, this
  // reducer's device current, a result buffer of the tensor's size (several ranks only: one rank
  // copies between the caller's buffers and staging directly), and our stream ordered after
  // the caller's work on the legacy default stream. Our stream is non-blocking, so without that
  // it could read a device input, or write a device output, that a copy the caller made with
  // cudaMemcpy (which returns before a pageable-to-device copy has landed) or a kernel on the
  // default stream (PyTorch's, for one) is still writing. Work on the caller's other streams is
  // the caller's to finish first (README: GPU tensors).
  StatusOr<ncclDataType_t> begin(size_t bytes, DType dtype) {
    ZPS_RETURN_IF_ERROR(usable());
    ZPS_ASSIGN_OR_RETURN(ncclDataType_t type, ncclType(dtype));
    ZPS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    if (size_ > 1) ZPS_RETURN_IF_ERROR(result_.reserve(bytes));
    ZPS_CUDA_RETURN_IF_ERROR(cudaEventRecord(callers_work_.get(), cudaStreamLegacy));
    ZPS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream_.get(), callers_work_.get(), 0));
    return type;
  }

  // Remembers the first failure and aborts the communicator, so that peers waiting on us fail too
  // instead of waiting out their deadline.
  Status fail(Status status) {
    if (failed_.ok()) failed_ = status;
    comm_.abort();
    return status;
  }

  // Queues collectives (`enqueue`, which checks each with queued()) as one NCCL group. The group is
  // closed even when a call in it failed, before the communicator is aborted: inside an open group
  // ncclCommAbort would only be queued with the group (NCCL's group.cc: a group ends at depth 0)
  // and never run, and every later NCCL call of this thread would be swallowed the same way.
  template <typename Enqueue>
  Status group(Enqueue enqueue) {
    ZPS_RETURN_IF_ERROR(call(nccl().ncclGroupStart(), "ncclGroupStart", __FILE__, __LINE__));
    const Status enqueued = enqueue();
    const ncclResult_t ended = nccl().ncclGroupEnd();
    if (!enqueued.ok()) return fail(enqueued);
    return call(ended, "ncclGroupEnd", __FILE__, __LINE__);
  }

  // A collective inside a group is only queued: NCCL reports its progress at ncclGroupEnd.
  Status queued(ncclResult_t result, const char* what, const char* file, int line) {
    if (result == ncclSuccess || result == ncclInProgress) return Status::OK();
    return ncclErrorToStatus(result, what, file, line, comm_.get());
  }

  // Checks an NCCL call's result; ncclInProgress (a non-blocking communicator still working on it)
  // is waited out with the deadline and the health checks.
  Status call(ncclResult_t result, const char* what, const char* file, int line) {
    if (result == ncclSuccess) return Status::OK();
    if (result != ncclInProgress) return fail(ncclErrorToStatus(result, what, file, line, comm_.get()));
    return poll(what, [&]() -> StatusOr<bool> {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t asked = nccl().ncclCommGetAsyncError(comm_.get(), &state);
      if (asked != ncclSuccess) return ncclErrorToStatus(asked, "ncclCommGetAsyncError", file, line, comm_.get());
      if (state == ncclInProgress) return false;
      if (state != ncclSuccess) return ncclErrorToStatus(state, what, file, line, comm_.get());
      return true;
    });
  }

  // Waits for the stream, watching NCCL's asynchronous errors and the node's health meanwhile.
  Status drain(const char* what) {
    return poll(what, [&]() -> StatusOr<bool> {
      if (comm_.get() != nullptr) {
        ncclResult_t state = ncclSuccess;
        const ncclResult_t asked = nccl().ncclCommGetAsyncError(comm_.get(), &state);
        if (asked == ncclSuccess && state != ncclSuccess && state != ncclInProgress)
          return ncclErrorToStatus(state, what, __FILE__, __LINE__, comm_.get());
      }
      const cudaError_t query = cudaStreamQuery(stream_.get());
      if (query == cudaErrorNotReady) return false;
      if (query != cudaSuccess) return cuda::cudaErrorToStatus(query, "cudaStreamQuery", __FILE__, __LINE__);
      return true;
    });
  }

  template <typename Done>
  Status poll(const char* what, Done done) {
    const auto start = Clock::now();
    auto next_health = start;
    for (int spins = 0;; ++spins) {
      StatusOr<bool> finished = done();
      if (!finished.ok()) return fail(finished.status());
      if (*finished) return Status::OK();
      const auto now = Clock::now();
      if (now >= next_health && keep_waiting_) {
        Status health = keep_waiting_();
        if (!health.ok()) return fail(health.withContext(what));
        next_health = now + kHealthInterval;
      }
      if (now - start > timeout_) {
        return fail(DeadlineExceeded(std::string(what) + ": local rank " + std::to_string(rank_) + " of " +
                                     std::to_string(size_) + " not done after " +
                                     std::to_string(std::chrono::duration<double>(timeout_).count()) + " s"));
      }
      // Spin briefly (small tensors finish in microseconds), then sleep.
      if (spins < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  const int rank_;
  const int size_;
  const int device_;
  const std::chrono::milliseconds timeout_;
  const KeepWaiting keep_waiting_;
  Status failed_;
  cuda::Stream stream_;
  cuda::Event callers_work_;   // recorded on the legacy default stream, waited for by stream_
  cuda::DeviceBuffer input_;   // a host tensor's bytes on the device
  cuda::DeviceBuffer result_;  // the node's sum, piece by piece
  std::unordered_map<int, cuda::PinnedBuffer> staging_;
  Communicator comm_;  // last: aborted before the buffers NCCL may still use are freed
};

}  // namespace

StatusOr<std::string> ncclNewUniqueId() {
  ZPS_RETURN_IF_ERROR(cuda::ncclLibrary().status());
  ncclUniqueId id;
  const ncclResult_t result = nccl().ncclGetUniqueId(&id);
  if (result != ncclSuccess) return ncclErrorToStatus(result, "ncclGetUniqueId", __FILE__, __LINE__, nullptr);
  return std::string(id.internal, sizeof(id.internal));
}

StatusOr<std::unique_ptr<DeviceLocalReducer>> makeNcclLocalReducer(const std::string& unique_id, int rank, int size,
                                                                   int device, std::chrono::milliseconds timeout,
                                                                   KeepWaiting keep_waiting) {
  if (size < 1 || rank < 0 || rank >= size)
    return InvalidArgument("NCCL local reducer: rank " + std::to_string(rank) + " of " + std::to_string(size));
  // One local rank only copies between the device and pinned staging: no NCCL call, so a machine
  // without libnccl still moves GPU tensors.
  if (size > 1) ZPS_RETURN_IF_ERROR(cuda::ncclLibrary().status());
  auto reducer = std::make_unique<NcclLocalReducer>(rank, size, device, timeout, std::move(keep_waiting));
  Status init = reducer->init(unique_id);
  if (!init.ok()) {
    std::string context = "joining the node's NCCL communicator on GPU " + std::to_string(device);
    // NCCL refuses two ranks on one GPU at init with ncclInvalidUsage ("Duplicate GPU detected",
    // newer versions "Multiple Ranks are using the same GPU"): say why that happened here.
    const int devices = cudaDeviceCount();
    if (size > devices) {
      context += " (" + std::to_string(size) + " local ranks share " + std::to_string(devices) +
                 " visible GPU(s): local rank r uses GPU r mod " + std::to_string(devices) + ")";
    }
    return init.withContext(context);
  }
  return std::unique_ptr<DeviceLocalReducer>(std::move(reducer));
}

}  // namespace zps::kernels
