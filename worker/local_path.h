// LocalPath: the worker's operations that take a step on the node before (and after) the network.
// With several local ranks (ZPS_LOCAL_SIZE > 1) a push-pull is reduce-scatter on the node, each
// rank's slice to the servers, all-gather on the node; tensors in GPU memory are staged through
// host memory (NCCL with several local ranks). Also the node's barrier and its end of the job
// (local rank 0 reports the node's verdict to the scheduler, the others wait for its word).
//
// Owned by the Worker for its whole life; `group` (null with one local rank) and `client` (null on
// local ranks other than 0) outlive it. Called from callers' threads: route() runs each local
// operation in the node-wide turn order, so the collectives line up on every local rank.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "ps/common/config.h"
#include "ps/node/scheduler_client.h"
#include "worker/dense_tensors.h"
#include "worker/local/local_group.h"
#include "worker/local/local_reducer.h"
#include "worker/recovery_state.h"
#include "worker/request_table.h"
#include "worker/request_waiter.h"

namespace zps {

class LocalPath {
 public:
  LocalPath(const Config& config, int rank, LocalGroup* group, SchedulerClient* client, DenseTensors* tensors,
            RequestTable* requests, RequestWaiter* waits, RecoveryState* recovery);

  // A push, pull or push-pull of a tensor: straight to the servers (one local rank and host memory,
  // or a process set's tensor in host memory) or through the local reduction.
  StatusOr<Handle> route(TensorId id, pb::DataCommand command, const void* in, void* out);
  // The barrier of every worker process of the job.
  Status barrier();
  // The end of the job for one process of a node with several local ranks; the exit code.
  int finish(const Status& result);

  // Several local ranks: a generation another local rank announced in the control segment makes
  // this process recover too (it may have no request in flight that a server could refuse). Why a
  // new local operation must not start; nullopt when none.
  std::optional<Status> recoveryPending();
  // recover(): the node's reducers start afresh (a collective cut short may have left the NCCL
  // communicator unusable).
  void resetReducers();

 private:
  StatusOr<LocalReducer*> reducerFor(const void* in, const void* out);
  StatusOr<Handle> reduceLocally(TensorId id, pb::DataCommand command, const DenseTensors::Shape& shape, const void* in,
                                 void* out);
  // A failed local operation ends the node's group, unless it failed because the job is recovering:
  // then every local rank goes on to recover() instead.
  void abortUnlessRecovering(const Status& s);

  const Config& config_;
  const int rank_;
  LocalGroup* const group_;
  SchedulerClient* const client_;
  DenseTensors* const tensors_;
  RequestTable* const requests_;
  RequestWaiter* const waits_;  // the local reduction's push-pulls wait through it
  RecoveryState* const recovery_;

  // The on-node halves of local reduction: shared memory (host tensors, local size > 1) and NCCL
  // (GPU tensors; created at the first one, collectively). Created and used by one thread at a
  // time: inside LocalGroup::inTurn with several local ranks, under device_mu_ with one.
  std::unique_ptr<LocalReducer> shm_reducer_;
  std::unique_ptr<LocalReducer> device_reducer_;
  std::mutex device_mu_;  // one local rank: GPU tensors share device_reducer_'s
                          // stream and buffers
};

}  // namespace zps
