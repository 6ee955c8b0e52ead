// The on-node halves of local reduction (ZPS_LOCAL_SIZE > 1, or a tensor in GPU memory), with one
// interface for both backends so that worker.cc's route() runs the same steps for each:
//   staging -> reduceScatter (this rank's pieces now hold the node's sum) -> push/pull of the
//   owned pieces with the servers -> allGather (every rank gets the whole summed tensor).
// Backends:
//   - shared memory (CPU tensors): worker/local/local_group.h's segments, summed by the CPU;
//   - NCCL (GPU tensors, or every tensor with ZPS_LOCAL_REDUCE=nccl): kernels/local_collectives.h.
// Which rank owns which piece is decided once, in worker.cc (placeForNode), for both.
//
// Called from the worker's calling thread, one collective at a time, in the same order on every
// local rank (the worker API's rule).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/local_collectives.h"
#include "worker/local/local_group.h"
#include "zps/dtype.h"
#include "zps/status.h"

namespace zps {

struct LocalTensor {
  int id = 0;
  size_t bytes = 0;
  DType dtype = DType::kUInt8;
  const std::vector<kernels::LocalPiece>* pieces = nullptr;  // every piece of the node, with owners
};

class LocalReducer {
 public:
  virtual ~LocalReducer() = default;
  virtual const char* name() const = 0;
  // Host memory of the tensor's size that this rank pushes its pieces from and pulls them into.
  virtual StatusOr<uint8_t*> staging(const LocalTensor& t) = 0;
  virtual Status reduceScatter(const LocalTensor& t, const void* in, uint8_t* staging) = 0;
  // `out` is null for a push without pull: then only the synchronisation remains.
  virtual Status allGather(const LocalTensor& t, const uint8_t* staging, void* out) = 0;
};

// Over `group`'s shared memory; `timeout` bounds each barrier.
std::unique_ptr<LocalReducer> makeShmLocalReducer(LocalGroup* group, std::chrono::milliseconds timeout);

// Joins this node's NCCL communicator on GPU (local rank modulo the visible devices). Collective
// over the node's local ranks: rank 0 makes the NCCL id and hands it over through `group`'s control
// segment. `group` is null for a single local rank, which needs no NCCL (only device<->host copies).
StatusOr<std::unique_ptr<LocalReducer>> joinNcclLocalReducer(LocalGroup* group, int local_rank, int local_size,
                                                             std::chrono::milliseconds timeout);

}  // namespace zps
