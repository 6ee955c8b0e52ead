// The zps worker API: what a training program uses to exchange tensors with the servers.
//
//   auto worker = zps::Worker::create();            // reads the DMLC_* / ZPS_* environment, joins the job
//   auto grad = (*worker)->declare("grad", bytes, zps::DType::kFloat32);   // before the first round
//   auto h = (*worker)->pushPull(*grad, local_grad, summed_grad);          // asynchronous (see below)
//   (*worker)->wait(*h, std::chrono::seconds(60));                       // every wait has a deadline
//   return (*worker)->finish(zps::Status::OK());                          // ends the job; exit code
//
// Semantics (server "sum" mode, BytePS style): every round, each worker pushes a tensor once; the servers
// sum the pushes of all workers; a pull returns that round's sum. Rounds are counted per tensor: the n-th
// push (or pushPull) of a tensor belongs to round n, and so does its n-th pull.
//
// Buffers passed to push/pull/pushPull (and pullRows/pushRows) must stay valid and unchanged until
// wait() on the handle returns. wait() never returns while a reply is being copied into a buffer, and
// when it returns an error (deadline, aborted, unavailable) the operation is cancelled, so a reply that
// arrives later is dropped and never written into the buffer: a pull's buffer is the caller's again.
// A push is sent from the caller's buffer without a copy, so after a cancelled push the transport may
// still read that buffer until the connection sends or drops it (keep it alive), and the servers may
// have summed part of it: the tensor's later pushes are refused with a message that says so. A
// cancelled pull that was the tensor's latest is retried by the next pull. See docs/cpp-api.md,
// "Timeouts and buffers". A Worker is thread-safe; one instance per process.
//
// Two kinds of operation complete inside the call instead: every push, pull and pushPull with several
// local ranks (ZPS_LOCAL_SIZE > 1: the node's reduce-scatter, the servers' round and the all-gather
// run in the caller's turn, in one order on every local rank), and any whose buffer is in GPU memory
// (staged through host memory). The call returns only when the operation has ended; its handle then
// carries the outcome, wait() returns it at once, and the buffers are already the caller's again.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zps/compression.h"
#include "zps/dtype.h"
#include "zps/status.h"

namespace zps {

using TensorId = int;
using TableId = int;
using Handle = uint64_t;

// Parameter-server mode: an embedding table whose rows live on the servers (sharded by key), created on
// first touch (uniform in [-init_scale, init_scale], deterministic from seed and key) and updated on the
// servers by `optimizer` ("sgd", "momentum", "adam" or "adagrad"). Synchronous by default: the n-th
// pushRows of every worker are summed and applied once, and a pullRows issued after this worker's n-th
// pushRows sees every worker's updates up to round n (it waits for them). With async
// (ZPS_ENABLE_ASYNC=1 sets the default) each push is applied at once and pulls never wait.
struct TableOptions {
  uint32_t dim = 8;
  std::string optimizer = "adagrad";
  float lr = 0.05f;
  float momentum = 0.9f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, initial_accumulator = 0.1f;
  float init_scale = 0.01f;
  uint64_t seed = 1;
  int async = -1;             // -1: from ZPS_ENABLE_ASYNC; 0: sync; 1: async
  uint64_t restore_step = 0;  // > 0: load the servers' shards checkpointed at this step
};

// Options of declare(). Compression (README "Gradient compression") applies to float32 tensors.
struct DeclareOptions {
  // Unset: ZPS_COMPRESSOR compresses this tensor when it has at least ZPS_MIN_COMPRESS_BYTES.
  std::optional<Compressor> compressor;
  double compress_ratio = 0;  // topk/randomk: share of each partition sent per round, in (0, 1]; 0: ZPS_COMPRESS_RATIO
  // Priority scheduling (docs/performance.md#priority-scheduling): set, this tensor's pushes wait in
  // their server's queue behind those of lower priority (send the layers the next forward pass needs
  // first with the lowest), with at most ZPS_CREDIT_BYTES in flight per server. Unset: with
  // ZPS_PRIORITY=1 its declaration index (0, 1, ...), otherwise its requests leave at once.
  std::optional<int64_t> priority;
  // True: this tensor's requests leave at once, in the order they are issued, even where priority
  // scheduling is on (ZPS_PRIORITY=1, or chosen for a job across hosts): a baseline to compare with.
  bool unscheduled = false;
  // Process sets (python/zps/torch/process_sets.py): set, only `contributors` workers (the set's
  // members) declare and push this tensor, and each round sums their pushes. Its keys come from a key
  // space of its own, numbered 1..1023 the same on every member, so that the tensors a set declares
  // shift neither the keys nor the placement of the other workers' tensors. 0 and 0: every worker.
  // Members are processes: with local ranks, each member pushes and pulls the whole tensor itself,
  // bypassing the node's local reduction (host memory only).
  int contributors = 0;
  uint32_t key_space = 0;
};

// Where one partition of a tensor lives.
struct PartitionInfo {
  uint64_t key = 0;
  int server = 0;     // server rank
  size_t offset = 0;  // byte offset in the tensor
  size_t bytes = 0;
};

// Bytes one process handed to push/pull and bytes it moved over the network for them. With local
// reduction (ZPS_LOCAL_SIZE > 1) each local rank sends only its pieces, so per node the network
// bytes equal the tensor bytes of one process, whatever the local size.
struct TrafficCounters {
  uint64_t tensor_bytes_pushed = 0;
  uint64_t network_bytes_pushed = 0;
  uint64_t tensor_bytes_pulled = 0;
  uint64_t network_bytes_pulled = 0;
};

// One server's totals since it started (Worker::serverStats, for zps bench).
struct ServerStats {
  uint64_t cpu_ns = 0;          // CPU time of the whole server process
  uint64_t peak_rss_bytes = 0;  // its peak resident memory (VmHWM)
  uint64_t pushed_bytes = 0;    // payload bytes of the pushes it received
  uint64_t summed_bytes = 0;    // bytes it added into sums (dst += src)
  uint64_t sum_ns = 0;          // time it spent adding them
};

class Worker {
 public:
  // Reads the environment (DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER,
  // DMLC_WORKER_ID, ...), registers with the scheduler and connects to every server. Blocks for at most the
  // rendezvous timeout. kInvalidArgument means a bad environment (exit 2 is the convention).
  static StatusOr<std::unique_ptr<Worker>> create();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int rank() const;
  int numWorkers() const;
  int numServers() const;
  // This process's place on its worker node (ZPS_LOCAL_RANK / ZPS_LOCAL_SIZE; 0 and 1 without local
  // reduction). Every local rank of a node has the node's rank(); a push of a tensor by all local
  // ranks counts as one contribution of the node: the servers receive their sum.
  int localRank() const;
  int localSize() const;
  TrafficCounters traffic() const;

  // Declares a tensor of `bytes` bytes (a multiple of the dtype size) and registers its partitions with
  // the servers. Every worker must declare the same tensors in the same order, before the first round.
  StatusOr<TensorId> declare(const std::string& name, size_t bytes, DType dtype);
  StatusOr<TensorId> declare(const std::string& name, size_t bytes, DType dtype, const DeclareOptions& options);
  // The compressor a declared tensor's pushes use (kNone for an unknown id).
  Compressor compressorOf(TensorId tensor) const;
  // The priority a declared tensor's push-pulls are scheduled by (unset: not scheduled, or an unknown id).
  std::optional<int64_t> priorityOf(TensorId tensor) const;
  // An async tensor (BytePS async): no rounds; the servers keep a running sum of every push and a pull
  // returns it as it is now. Workers keep parameters in one by pushing weight deltas.
  StatusOr<TensorId> declareAsync(const std::string& name, size_t bytes, DType dtype);

  StatusOr<Handle> push(TensorId tensor, const void* data);
  StatusOr<Handle> pull(TensorId tensor, void* out);
  StatusOr<Handle> pushPull(TensorId tensor, const void* data, void* out);

  // Param mode. Keys may repeat across calls; within one call they should be unique (repeats are summed
  // on push and returned twice on pull). `out` receives n x dim floats, `grads` holds n x dim floats.
  // With several local ranks each one is a table client of its own (no local reduction): every local
  // rank declares the table, and in each synchronous round every local rank of every node pushes once
  // (empty when it has no rows); the round is applied when all of them have.
  StatusOr<TableId> declareTable(const std::string& name, const TableOptions& options);
  StatusOr<Handle> pullRows(TableId table, const uint64_t* keys, size_t n, float* out);
  // A prefetch: the rows as a pullRows issued after this worker's next pushRows would see them, issued
  // now. In sync mode the servers hold it until every worker's round n + 1 is applied (n: this
  // worker's pushRows so far), so its rows are bit for bit those of that later pull; with async tables
  // it is served at once and may lack the pushes that come after it (at most this worker's next one).
  // `ahead` is 0 (a plain pullRows) or 1 (kMaxPullAhead); more is refused. The wait on its handle has
  // ZPS_REQUEST_TIMEOUT's deadline like any other.
  static constexpr uint32_t kMaxPullAhead = 1;
  StatusOr<Handle> pullRowsAhead(TableId table, const uint64_t* keys, size_t n, float* out, uint32_t ahead);
  StatusOr<Handle> pushRows(TableId table, const uint64_t* keys, size_t n, const float* grads);
  // Asks every server to write its shard of every table as of `step` (after that round is applied) into
  // ZPS_CHECKPOINT_DIR, and waits for all of them. Called by one process (worker 0, local rank 0).
  Status checkpointTables(uint64_t step);
  // The server that holds a row.
  int serverOfRow(uint64_t key) const;

  // Waits for an operation. kDeadlineExceeded names the partitions and servers still outstanding;
  // kAborted means the scheduler ended the job (its reason is in the message). The handle is released.
  // On an error the operation is cancelled (see the buffer rule at the top): its buffers are the
  // caller's again, and the message says whether the next call retries the round.
  Status wait(Handle handle, std::chrono::milliseconds timeout);
  // Waits with the default deadline (ZPS_REQUEST_TIMEOUT).
  Status wait(Handle handle);
  // Non-blocking: true when the operation has ended (wait() then returns its outcome at once), false
  // while it is in flight. The handle stays valid until wait(). kInvalidArgument for an unknown or
  // already waited handle.
  StatusOr<bool> poll(Handle handle) const;

  // Waits until every worker reached this barrier.
  Status barrier();

  // Reports this worker's result to the scheduler, waits for the job to end and returns the process exit
  // code: 0 when the job completed and `result` is OK, non-zero otherwise.
  int finish(const Status& result);

  // For zps status, the dashboard, zps launch's status line and /metrics: the training program's latest
  // step, loss and throughput, and for a program that trains in epochs the epoch in progress (1-based)
  // of `epochs` (0, 0: no epochs, only steps are shown). Cheap (a few atomics); call it every step or
  // every few. It travels to the scheduler with the next heartbeat.
  void reportTrainingProgress(uint64_t step, double loss, double samples_per_sec, uint64_t epoch = 0,
                              uint64_t epochs = 0);

  // Recovery (ZPS_RECOVERY=1 on the scheduler). When a node is lost, pending and new operations fail
  // with kUnavailable and recovering() turns true. recover() then waits for the replacement (at most
  // ZPS_RECOVERY_TIMEOUT), reconnects and forgets every tensor and table: the program declares them
  // again in the same order (tables with restore_step set to the checkpoint it rolls back to), resets
  // its own state to that checkpoint and redoes the steps since. The servers have dropped everything.
  bool recovering() const;
  Status recover();

  std::vector<PartitionInfo> partitions(TensorId tensor) const;
  size_t partitionBytes() const;
  // Asks every server for its totals; element i is server i's.
  StatusOr<std::vector<ServerStats>> serverStats();

 private:
  struct Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zps
