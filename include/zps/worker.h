// The zps worker API: what a training program uses to exchange tensors with the servers.
//
//   auto worker = zps::Worker::create();            // reads the DMLC_* / ZPS_* environment, joins the job
//   auto grad = (*worker)->declare("grad", bytes, zps::DType::kFloat32);   // before the first round
//   auto h = (*worker)->pushPull(*grad, local_grad, summed_grad);          // asynchronous
//   (*worker)->wait(*h, std::chrono::seconds(60));                       // every wait has a deadline
//   return (*worker)->finish(zps::Status::OK());                          // ends the job; exit code
//
// Semantics (server "sum" mode, BytePS style): every round, each worker pushes a tensor once; the servers
// sum the pushes of all workers; a pull returns that round's sum. Rounds are counted per tensor: the n-th
// push (or pushPull) of a tensor belongs to round n, and so does its n-th pull.
//
// Buffers passed to push/pull/pushPull must stay valid and unchanged until wait() on the handle returns.
// A Worker is thread-safe; one instance per process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zps/dtype.h"
#include "zps/status.h"

namespace zps {

using TensorId = int;
using Handle = uint64_t;

// Where one partition of a tensor lives.
struct PartitionInfo {
  uint64_t key = 0;
  int server = 0;      // server rank
  size_t offset = 0;   // byte offset in the tensor
  size_t bytes = 0;
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

  // Declares a tensor of `bytes` bytes (a multiple of the dtype size) and registers its partitions with
  // the servers. Every worker must declare the same tensors in the same order, before the first round.
  StatusOr<TensorId> declare(const std::string& name, size_t bytes, DType dtype);

  StatusOr<Handle> push(TensorId tensor, const void* data);
  StatusOr<Handle> pull(TensorId tensor, void* out);
  StatusOr<Handle> pushPull(TensorId tensor, const void* data, void* out);

  // Waits for an operation. kDeadlineExceeded names the partitions and servers still outstanding;
  // kAborted means the scheduler ended the job (its reason is in the message). The handle is released.
  Status wait(Handle handle, std::chrono::milliseconds timeout);
  // Waits with the default deadline (ZPS_REQUEST_TIMEOUT).
  Status wait(Handle handle);

  // Waits until every worker reached this barrier.
  Status barrier();

  // Reports this worker's result to the scheduler, waits for the job to end and returns the process exit
  // code: 0 when the job completed and `result` is OK, non-zero otherwise.
  int finish(const Status& result);

  std::vector<PartitionInfo> partitions(TensorId tensor) const;
  size_t partitionBytes() const;

 private:
  struct Impl;
  explicit Worker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zps
