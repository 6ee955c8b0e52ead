// DenseTensors: the worker's declared tensors (server "sum" mode) and their push/pull requests.
// Declares a tensor (placement of its partitions on the servers, its compressor, a DECLARE to every
// server holding a partition), counts its rounds per side (push, pull), sends one request per
// partition for a push, pull or push-pull, tells the servers which rounds it is done with
// (received_through), and gives a round back when a failed wait cancelled it.
//
// Rounds after a cancelled operation: when a wait on round N of a tensor fails before every reply
// came back, the operation is cancelled. If N is the latest round issued on its sides, the round is
// given back: the next call of the same kind (push, pull or push-pull) sends round N again. That is
// safe for pushes: the servers sum each worker's push of a round once, so a repeated push is only
// acknowledged when the first one had arrived. If later rounds were issued already, N is not
// retried.
//
// Async tensors: their pushes carry a number (AsyncSequence) that servers apply once, so a resend or
// a duplicated message never adds a push twice. Rounds still count their pushes and pulls here.
//
// Owned by the Worker; emptied by recover(). Thread-safe (callers' threads; the I/O thread marks
// rounds received through the operations' on_done).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/local_collectives.h"
#include "ps/common/config.h"
#include "worker/async_sequence.h"
#include "worker/compression.h"
#include "worker/placement.h"
#include "worker/received_rounds.h"
#include "worker/request_table.h"

namespace zps {

class DenseTensors {
 public:
  DenseTensors(const Config& config, int rank, RequestTable* requests);

  StatusOr<TensorId> declare(const std::string& name, size_t bytes, DType dtype, bool async,
                             const DeclareOptions& options);
  // Sends one request per partition; `in` and `out` may be null. Returns the new handle.
  StatusOr<Handle> issue(TensorId id, pb::DataCommand command, const void* in, void* out);

  // What the local-rank path needs of a tensor, counted as one operation of `command` in traffic().
  struct Shape {
    size_t bytes = 0;
    DType dtype = DType::kUInt8;
    bool own_pushes = false;  // Tensor::own_pushes
    int64_t node_index = -1;  // Tensor::node_index
  };
  StatusOr<Shape> account(TensorId id, pb::DataCommand command);
  // Every piece of the node with the local rank that owns it (a copy: a declare may move the
  // tensors).
  std::vector<kernels::LocalPiece> nodePieces(TensorId id) const;

  std::vector<PartitionInfo> partitions(TensorId id) const;
  Compressor compressorOf(TensorId id) const;
  std::optional<int64_t> priorityOf(TensorId id) const;
  TrafficCounters traffic() const;
  int count() const;
  // recover(): every tensor is forgotten; the program declares them again, in the same order.
  void clear();

 private:
  struct Tensor {
    std::string name;
    size_t bytes;
    DType dtype;
    std::vector<PartitionInfo> parts;  // the partitions this process pushes and pulls
    // A process set's tensor: this process pushes and pulls all of it, bypassing the local reduction,
    // and the servers count each process's pushes apart (the set's members on a node are not all its
    // local ranks).
    bool own_pushes = false;
    // A tensor of every worker: its place among those, the same on every process of the job (a
    // process's tensor ids also count the process sets' tensors it declared, which its local ranks
    // need not share). The node's local operations are matched by it. -1 for a process set's tensor.
    int64_t node_index = -1;
    // Every piece of the node with the local rank that owns it (local reduction's slice plan).
    std::vector<kernels::LocalPiece> node_pieces;
    uint64_t push_round = 0;
    uint64_t pull_round = 0;
    std::shared_ptr<TensorCompression> compression;  // null: dense pushes
    ReceivedRounds received;                         // sent as received_through
    // Set when a push of this tensor was cancelled: why its pushes are refused from then on.
    std::string push_refused;
    // Set: pushes wait in the push scheduler by this priority (sync tensors only).
    std::optional<int64_t> priority;
    std::shared_ptr<AsyncSequence> async;  // async tensors: numbers their pushes; null for sync ones
  };

  // An async tensor's push: its number and the sequence that gave it (empty otherwise).
  struct AsyncPush {
    std::shared_ptr<AsyncSequence> sequence;
    uint64_t seq = 0;
  };
  StatusOr<AsyncPush> numberAsyncPush(TensorId id, pb::DataCommand command);
  StatusOr<Handle> issueNumbered(TensorId id, pb::DataCommand command, const void* in, void* out,
                                 const AsyncPush& numbered);
  // key_id: the tensor's place in its key space (keys are key_id << kKeyPartitionBits | partition).
  std::vector<PartitionInfo> placeForNode(Placement* placement, uint64_t key_id, size_t bytes, size_t esize,
                                          std::vector<kernels::LocalPiece>* node_pieces);
  // One request of `command` for partition `p`: a push carries `push`, a pull lands in `out`.
  // `push_seq`: an async tensor's push number (0 otherwise). `scheduled_push`: a PUSH that waits in
  // the priority scheduler's queue, which asks for push hints (ZPS_PUSH_HINTS).
  OutgoingRequest request(pb::DataCommand command, const PartitionInfo& p, EncodedPush push, void* out,
                          const std::string& name, DType dtype, uint64_t round, uint64_t received_through,
                          uint64_t push_seq = 0, bool scheduled_push = false);
  // A push-pull under priority scheduling: a PUSH, which holds push credit until the server has taken
  // it, then a PULL of the same round, which holds no credit (push_scheduler.h says why).
  void scheduledPushPull(FanOut* fan, int64_t priority, const PartitionInfo& p, EncodedPush push, void* out,
                         const std::string& name, DType dtype, uint64_t round, uint64_t received_through);
  // The status of a failed wait on round `round` of tensor `id`, after its cancellation.
  Status cancelled(TensorId id, uint64_t epoch, pb::DataCommand command, uint64_t round, const Status& failed);

  const Config& config_;
  const int rank_;
  RequestTable* const requests_;

  mutable std::mutex mu_;
  std::vector<Tensor> tensors_;
  std::unique_ptr<Placement> placement_;
  // Process sets' key spaces (DeclareOptions::key_space): per space, its tensors so far and their
  // placement, apart from the tensors of every worker (whose count alone numbers the tables' keys).
  struct KeySpace {
    uint64_t tensors = 0;
    Placement placement;
  };
  std::unordered_map<uint32_t, KeySpace> key_spaces_;
  int set_tensors_ = 0;
  uint64_t epoch_ = 0;  // counts clear(): an operation of a forgotten tensor
                        // touches no new one
  TrafficCounters traffic_;
};

}  // namespace zps
