// CUDA runtime helpers private to kernels/cuda: error -> Status conversion and RAII owners for
// device memory and streams. This header includes cuda_runtime_api.h, so only CUDA-built sources
// in kernels/cuda (and tests/cuda) may include it; public headers stay plain C++.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "zps/status.h"

namespace zps::kernels::cuda {

// Builds "<what> failed at <file>:<line>: <cudaErrorName>: <description>". A missing device,
// driver or kernel image maps to kUnavailable (callers fall back to the CPU); everything else,
// out-of-memory included, is kInternal.
Status cudaErrorToStatus(cudaError_t error, const char* what, const char* file, int line);

}  // namespace zps::kernels::cuda

// Evaluates a CUDA runtime call once and returns a Status naming the call, file and line when it
// did not return cudaSuccess.
#define ZPS_CUDA_RETURN_IF_ERROR(call)                                                            \
  do {                                                                                            \
    const cudaError_t zps_cuda_error_ = (call);                                                   \
    if (zps_cuda_error_ != cudaSuccess) {                                                         \
      return ::zps::kernels::cuda::cudaErrorToStatus(zps_cuda_error_, #call, __FILE__, __LINE__); \
    }                                                                                             \
  } while (0)

namespace zps::kernels::cuda {

enum class MemoryKind { kDevice, kPinnedHost };

// CUDA memory that only grows: device memory (cudaMalloc) or page-locked host memory
// (cudaHostAlloc, what makes host<->device copies truly asynchronous). Owned by one reducer or
// engine for its whole life and used only from that owner's thread; freed on destruction. Growing
// discards the old contents, which is fine for staging buffers that are overwritten on every use.
template <MemoryKind kKind>
class CudaMemory {
 public:
  CudaMemory() = default;
  ~CudaMemory() { release(); }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;
  CudaMemory(CudaMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  CudaMemory& operator=(CudaMemory&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }

  // Makes the buffer at least `bytes` long (device memory: on the current device).
  Status reserve(size_t bytes);

  void* data() const { return data_; }
  uint8_t* bytePtr() const { return static_cast<uint8_t*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void release();

  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<MemoryKind::kDevice>;
using PinnedBuffer = CudaMemory<MemoryKind::kPinnedHost>;

// A CUDA event without timing (the cheap kind), for "has this copy finished" questions. Owns at
// most one event: create() again destroys the previous one first.
class Event {
 public:
  Event() = default;
  ~Event() { release(); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      release();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }

  // Creates the event on the current device.
  Status create();
  cudaEvent_t get() const { return event_; }

 private:
  void release();

  cudaEvent_t event_ = nullptr;
};

// A non-blocking CUDA stream (it does not synchronise with the legacy default stream). Owned by one
// reducer or engine, used from its thread, destroyed with it.
class Stream {
 public:
  Stream() = default;
  ~Stream() { release(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      release();
      stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
  }

  // Creates the stream on the current device.
  Status create();

  cudaStream_t get() const { return stream_; }

 private:
  void release();

  cudaStream_t stream_ = nullptr;
};

}  // namespace zps::kernels::cuda
