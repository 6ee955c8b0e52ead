// Device-side local reduction for the processes of one worker node (one per GPU): the NCCL twin of
// the shared-memory reducer in worker/local. Plain C++ (no CUDA or NCCL headers), so the worker
// includes it whether or not the build has them; without them makeNcclLocalReducer returns
// kUnavailable with the reason (kernels/nccl_stub.cc).
//
// The worker cuts each tensor into pieces and gives piece i to local rank i % size (the same slice
// logic as the shared-memory backend: worker.cc placeForNode). Each rank pushes and pulls only the
// pieces it owns, so per node every tensor byte crosses the network once. This reducer does the
// on-node halves: reduceScatter sums every rank's input into the pieces each owns and copies the
// owned pieces to pinned host memory for the push; allGather copies the pulled pieces back to the
// device and gives every rank the whole tensor.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zps/dtype.h"
#include "zps/status.h"

namespace zps::kernels {

// A byte range of a tensor and the local rank that owns it (pushes and pulls it).
struct LocalPiece {
  size_t offset = 0;
  size_t bytes = 0;
  int owner = 0;
};

// One NCCL call of a local collective. A run of `size` equal pieces owned by ranks 0..size-1 in
// order (a whole partition) is one reduce-scatter (one all-gather on the way back); any other piece
// (the ragged tail of a tensor) is a reduce to its owner (a broadcast from it).
struct CollectiveStep {
  bool whole_partition = false;
  size_t offset = 0;       // of the first piece
  size_t piece_bytes = 0;  // of each piece
  int owner = 0;           // single pieces only
};

// Plans the NCCL calls for `pieces` (in tensor order). Pure: tested without a GPU.
std::vector<CollectiveStep> planLocalCollectives(const std::vector<LocalPiece>& pieces, int size);

// Called while a device collective waits (every few milliseconds): a non-OK status (a local peer
// died, the node's group was aborted) ends the wait, aborts the communicator and is returned.
using KeepWaiting = std::function<Status()>;

class DeviceLocalReducer {
 public:
  virtual ~DeviceLocalReducer() = default;

  // Pinned host memory of at least `bytes` for tensor `tensor_id`, kept and reused for later
  // rounds of that tensor. The worker pushes from it and pulls into it.
  virtual StatusOr<uint8_t*> staging(int tensor_id, size_t bytes) = 0;

  // `in` (device or host memory, `bytes` long) is this rank's contribution. Afterwards every piece
  // this rank owns holds, in `staging`, the sum of all local ranks' contributions.
  virtual Status reduceScatter(const void* in, size_t bytes, DType dtype, const std::vector<LocalPiece>& pieces,
                               uint8_t* staging) = 0;

  // `staging` holds the servers' sums in the pieces this rank owns. Afterwards `out` (device or
  // host memory) holds the whole tensor on every local rank.
  virtual Status allGather(const uint8_t* staging, size_t bytes, DType dtype, const std::vector<LocalPiece>& pieces,
                           void* out) = 0;
};

// A fresh NCCL unique id (the node's local rank 0 makes it and hands the bytes to its peers).
StatusOr<std::string> ncclNewUniqueId();

// Joins the node's NCCL communicator on `device` (collective: every local rank calls it with the
// same id). With size 1 there is no communicator: only copies between the device and staging. Every
// wait (initialisation included) gives up after `timeout` or when `keep_waiting` fails, and then
// aborts the communicator, so a dead peer never hangs the survivors.
StatusOr<std::unique_ptr<DeviceLocalReducer>> makeNcclLocalReducer(const std::string& unique_id, int rank, int size,
                                                                   int device, std::chrono::milliseconds timeout,
                                                                   KeepWaiting keep_waiting);

// Whether `p` points into CUDA device (or managed) memory. False without CUDA or a device.
bool isDevicePointer(const void* p);

}  // namespace zps::kernels
