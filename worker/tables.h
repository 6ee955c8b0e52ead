// Tables: the worker's embedding tables (server "param" mode, include/zps/worker.h TableOptions).
// Declares a table on every server, splits pullRows/pushRows by the server that holds each row,
// counts the rounds of synchronous tables, and asks the servers to checkpoint their shards.
//
// Tables bypass the node's local reduction: every local rank pulls and pushes its own rows (sparse
// rows of different batches have little to sum on the node), and the DECLARE tells the servers how
// many local ranks each node has, so that a round waits for one push per (node, local rank).
//
// Async tables number their pushes (AsyncSequence), so servers apply each push's rows once however
// often the network delivers it.
//
// Owned by the Worker; emptied by recover(). Thread-safe (callers' threads).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/common/config.h"
#include "worker/async_sequence.h"
#include "worker/request_table.h"
#include "worker/worker_observer.h"

namespace zps {

class Tables {
 public:
  // obs may be null (tests).
  Tables(const Config& config, RequestTable* requests, WorkerObserver* obs);

  // Tables and tensors share the key space: a table takes the key of a tensor id nobody else uses,
  // past the `tensors` declared so far.
  StatusOr<TableId> declare(const std::string& name, const TableOptions& options, int tensors);
  // ahead (0 or Worker::kMaxPullAhead): how many of this worker's pushes the rows must include beyond
  // those already made (a prefetch issued before the step's push: 1).
  StatusOr<Handle> pullRows(TableId table, const uint64_t* keys, size_t n, float* out, uint32_t ahead = 0);
  StatusOr<Handle> pushRows(TableId table, const uint64_t* keys, size_t n, const float* grads);
  Status checkpoint(uint64_t step);
  // The server that holds a row.
  int serverOfRow(uint64_t key) const;
  // recover(): every table is forgotten; the program declares them again, in the same order.
  void clear();

 private:
  struct Table {
    std::string name;
    uint64_t key;
    TableOptions options;
    uint64_t push_round = 0;
    std::shared_ptr<AsyncSequence> async;  // async tables: numbers their pushes; null for sync ones
  };

  const Config& config_;
  RequestTable* const requests_;
  WorkerObserver* const obs_;

  mutable std::mutex mu_;
  std::vector<Table> tables_;
};

}  // namespace zps
