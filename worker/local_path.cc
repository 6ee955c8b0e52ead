#include "worker/local_path.h"

#include <glog/logging.h>

#include <algorithm>

#include "kernels/local_collectives.h"

namespace zps {

using Clock = std::chrono::steady_clock;

LocalPath::LocalPath(const Config& config, int rank, LocalGroup* group, SchedulerClient* client, DenseTensors* tensors,
                     RequestTable* requests, RequestWaiter* waits, RecoveryState* recovery)
    : config_(config),
      rank_(rank),
      group_(group),
      client_(client),
      tensors_(tensors),
      requests_(requests),
      waits_(waits),
      recovery_(recovery) {}

std::optional<Status> LocalPath::recoveryPending() {
  if (group_) {
    std::string why;
    const uint64_t announced = group_->announcedGeneration(&why);
    recovery_->notice(announced, Unavailable("recovering: " + why));
  }
  return recovery_->pending();
}

void LocalPath::abortUnlessRecovering(const Status& s) {
  if (group_ && !recoveryPending().has_value()) group_->abort(s.message());
}

void LocalPath::resetReducers() {
  shm_reducer_.reset();
  device_reducer_.reset();
}

StatusOr<LocalReducer*> LocalPath::reducerFor(const void* in, const void* out) {
  const bool on_device = kernels::isDevicePointer(in) || kernels::isDevicePointer(out);
  if (on_device && config_.local_reduce == "shm")
    return InvalidArgument(
        "ZPS_LOCAL_REDUCE=shm takes host tensors only, and "
        "this one is in GPU memory; "
        "use auto or nccl");
  if (!on_device && !(group_ && config_.local_reduce == "nccl")) {
    // One process per node, host memory: straight to the servers.
    if (!group_) return nullptr;
    if (!shm_reducer_) shm_reducer_ = makeShmLocalReducer(group_, config_.request_timeout);
    return shm_reducer_.get();
  }
  if (!device_reducer_) {
    ZPS_ASSIGN_OR_RETURN(device_reducer_, joinNcclLocalReducer(group_, config_.local_rank, config_.local_size,
                                                               config_.rendezvous_timeout));
    LOG(INFO) << "worker local rank " << config_.local_rank << ": local reduction of GPU tensors with "
              << (config_.local_size > 1 ? "NCCL" : "pinned staging (one local rank: no NCCL)");
  }
  return device_reducer_.get();
}

StatusOr<Handle> LocalPath::route(TensorId id, pb::DataCommand command, const void* in, void* out) {
  ZPS_ASSIGN_OR_RETURN(DenseTensors::Shape shape, tensors_->account(id, command));
  // A local step is needed with several processes per node, or for a tensor in GPU memory (the
  // servers take host bytes).
  if (!group_ && !kernels::isDevicePointer(in) && !kernels::isDevicePointer(out))
    return tensors_->issue(id, command, in, out);
  if (!group_) {
    std::lock_guard<std::mutex> lock(device_mu_);
    return reduceLocally(id, command, shape, in, out);
  }
  if (shape.own_pushes) {
    // A process set's tensor: its members on this node are not every local rank, so it is not
    // reduced here (no turn, no collective the others would wait in); this process pushes it all.
    if (kernels::isDevicePointer(in) || kernels::isDevicePointer(out))
      return InvalidArgument("tensor " + std::to_string(id) +
                             " of a process set is in GPU memory; with several local ranks a process set's "
                             "tensors take host memory (copy it to the CPU first)");
    return tensors_->issue(id, command, in, out);
  }
  // Several local ranks: their shared-memory barriers and NCCL collectives must run in one order on
  // every rank, whatever user threads issue them (an interleaving would sum the wrong slots or hang
  // NCCL), so each operation waits for its turn in the order local rank 0 runs them.
  if (auto pending = recoveryPending()) return *pending;  // no turn of the old generation starts
  StatusOr<Handle> handle = InternalError("local operation did not run");
  // By the tensor's node index, not its id: local ranks in different process sets count different ids.
  const uint64_t op = static_cast<uint64_t>(shape.node_index) << 8 | static_cast<uint64_t>(command);
  Status turn = group_->inTurn(op, pb::DataCommand_Name(command) + " of tensor " + std::to_string(shape.node_index),
                               config_.request_timeout, [&] {
                                 handle = reduceLocally(id, command, shape, in, out);
                                 return Status::OK();
                               });
  if (!turn.ok()) {
    abortUnlessRecovering(turn);
    return turn;
  }
  return handle;
}

StatusOr<Handle> LocalPath::reduceLocally(TensorId id, pb::DataCommand command, const DenseTensors::Shape& shape,
                                          const void* in, void* out) {
  auto chosen = reducerFor(in, out);
  if (!chosen.ok()) {
    abortUnlessRecovering(chosen.status());
    return chosen.status();
  }
  LocalReducer* reducer = *chosen;
  if (reducer == nullptr) return tensors_->issue(id, command, in, out);
  const char* bad_buffer = in == nullptr && command != pb::CMD_PULL    ? "push with a null buffer"
                           : out == nullptr && command != pb::CMD_PUSH ? "pull into a null buffer"
                                                                       : nullptr;
  if (bad_buffer != nullptr) {
    // The other local ranks are already in this collective and would wait for this one until their
    // deadline: end the group so that they fail now, naming the cause. It is the caller's mistake,
    // which a recovery would not mend, so the group ends even while the job recovers.
    const Status refused = InvalidArgument(std::string(bad_buffer) + " (" + pb::DataCommand_Name(command) +
                                           " of tensor " + std::to_string(id) + ")");
    if (group_) group_->abort("local rank " + std::to_string(config_.local_rank) + ": " + refused.message());
    return refused;
  }

  // The collective runs to completion here; the handle carries its outcome. Every local rank runs
  // the same operations in the same order (route's turns), so the barriers line up.
  const bool pushing = command != pb::CMD_PULL;
  const bool pulling = command != pb::CMD_PUSH;
  auto fail = [this](Status s) {
    abortUnlessRecovering(s);
    return requests_->completed(std::move(s));
  };
  const std::vector<kernels::LocalPiece> pieces = tensors_->nodePieces(id);
  const LocalTensor view{id, shape.bytes, shape.dtype, &pieces};
  auto staging = reducer->staging(view);
  if (!staging.ok()) return fail(staging.status());
  if (pushing) {
    Status s = reducer->reduceScatter(view, in, *staging);
    if (!s.ok()) return fail(s);
  }
  auto handle = tensors_->issue(id, command, pushing ? *staging : nullptr, pulling ? *staging : nullptr);
  if (!handle.ok()) return fail(handle.status());
  std::shared_ptr<PendingOp> op = requests_->take(*handle);
  // Wait in short slices so that a dead peer or an aborted group ends the wait early.
  const auto deadline = Clock::now() + config_.request_timeout;
  Status waited;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    waited = waits_->waitFor(op, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(200)));
    if (waited.code() != StatusCode::kDeadlineExceeded || Clock::now() >= deadline || !group_) break;
    Status health = group_->health();
    if (!health.ok()) {
      waited = health;
      break;
    }
  }
  if (!waited.ok()) {
    requests_->cancel(op);  // the staging buffer is the reducer's again
    return fail(waited);
  }
  Status s = reducer->allGather(view, *staging, pulling ? out : nullptr);
  if (!s.ok()) return fail(s);
  return requests_->completed(Status::OK());
}

Status LocalPath::barrier() {
  // Recovering (a server's reply may say so before the scheduler does): the barrier would be of the
  // old generation, which fails; the caller recovers and enters it again.
  if (!group_) {
    if (auto pending = recovery_->pending()) return *pending;
    return client_->barrier(pb::GROUP_WORKERS, config_.rendezvous_timeout);
  }
  // Not a turn (worker/local/local_group.h, Ordering): a push-pull that another thread of this
  // process is in, or waits to run, may need the other nodes' pushes, which they send after this
  // barrier.
  if (auto pending = recoveryPending()) return *pending;
  Status s = group_->workerBarrier(config_.rendezvous_timeout, [&] {
    if (!group_->isRoot()) return Status::OK();
    Status across = client_->barrier(pb::GROUP_WORKERS, config_.rendezvous_timeout);
    // Unavailable: the scheduler announced a recovery, which the other local ranks hear of through
    // the control segment (the client may still be about to tell this process).
    if (!across.ok() && across.code() != StatusCode::kUnavailable) abortUnlessRecovering(across);
    return across;
  });
  if (!s.ok()) abortUnlessRecovering(s);
  return s;
}

int LocalPath::finish(const Status& result) {
  const TrafficCounters mine = tensors_->traffic();
  const std::string me = "worker " + std::to_string(rank_) + " local rank " + std::to_string(config_.local_rank);
  if (!group_->isRoot()) {
    std::string reason;
    const int code = group_->waitExit(result, mine, &reason);
    if (code != 0)
      LOG(ERROR) << me << ": " << reason;
    else
      LOG(INFO) << me << ": " << reason;
    return result.ok() ? code : 1;
  }
  if (config_.recovery && group_->peerDied()) {
    // The node is lost, as a pod would be: leaving without a verdict (the client says goodbye) lets
    // the scheduler hold this rank for a replacement node instead of failing the job.
    LOG(ERROR) << me << ": " << result.message() << "; leaving the job so that a replacement node takes rank " << rank_
               << " (ZPS_RECOVERY)";
    return 1;
  }
  TrafficCounters node;
  Status gathered = group_->gatherResults(result, mine, config_.job_end_timeout, &node);
  Status verdict = !result.ok() ? result : gathered;
  if (verdict.ok()) {
    // The property local reduction exists for: a node sends each tensor byte once.
    LOG(INFO) << "worker " << rank_ << ": node traffic over " << config_.local_size << " local ranks: tensor bytes "
              << mine.tensor_bytes_pushed << " pushed / " << mine.tensor_bytes_pulled
              << " pulled per rank; network bytes " << node.network_bytes_pushed << " pushed / "
              << node.network_bytes_pulled << " pulled by the node";
  }
  if (!verdict.ok()) LOG(ERROR) << me << ": " << verdict.message();
  auto shutdown = client_->finish(verdict.ok(), verdict.message(), config_.job_end_timeout);
  if (!shutdown.ok()) {
    group_->publishExit(1, shutdown.status().message());
    group_->leave();
    LOG(ERROR) << me << ": " << shutdown.status().message();
    return 1;
  }
  group_->publishExit(verdict.ok() ? shutdown->exit_code() : 1, shutdown->reason());
  group_->leave();
  if (shutdown->exit_code() != 0)
    LOG(ERROR) << me << ": " << shutdown->reason();
  else
    LOG(INFO) << me << ": " << shutdown->reason();
  return verdict.ok() ? shutdown->exit_code() : 1;
}

}  // namespace zps
