// Engine: one summation thread of a server and the keys it owns (a SumStore and a ParamStore), fed
// by the server's dispatcher (server/server.cc). The inline engine has no thread: the dispatcher
// runs small summation keys on it directly (process()), which saves two thread hand-offs per request.
//
// Owned by the Server. submit() is called by the dispatcher (the transport's I/O thread); process()
// and handle() only ever by the one thread that owns the engine (its own, or the dispatcher for the
// inline engine).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/reducer.h"
#include "ps/common/bounded_queue.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "server/memory_budget.h"
#include "server/param_store.h"
#include "server/scheduling/push_pacer.h"
#include "server/sum_store.h"
#include "server/table_checkpoint.h"

namespace zps {

struct EngineTask {
  PeerId peer;
  int worker;
  wire::DataMessage msg;
  bool reset = false;  // ZPS_RECOVERY: drop every key and table (a new generation starts over)
  // From the worker's HELLO: tables and process sets' keys count pushes per (worker, local rank).
  uint32_t local_rank = 0;
};

class Engine {
 public:
  // pacer (may be null): the acknowledgements of credit-holding pushes go through it
  // (server/scheduling/push_pacer.h).
  // skip_zeros: sums are answered nonzero-encoded where that saves enough (ZPS_SKIP_ZEROS).
  Engine(int index, std::unique_ptr<kernels::Reducer> reducer, int num_workers, const ShardPlace& checkpoints,
         MemoryBudget* budget, Transport* transport, PushPacer* pacer = nullptr, bool threaded = true,
         bool skip_zeros = false);
  ~Engine() { stop(); }
  void stop();
  // Read after the engine thread has stopped (the destructor path joins it first).
  ParamCounters paramCounters() const { return params_->counters(); }
  // What this engine's summation stores took in and added (any thread may read it; CMD_STATS).
  SumCounts* sumCounts() { return &sum_counts_; }
  void finalCheckpoint() { params_->checkpointAll(); }

  // Handles one task and sends its replies. Only ever called by one thread per engine.
  void process(const EngineTask& task);
  // Handles one request and appends its answers to *out (a fused message's entries share one list).
  // Only ever called by the thread that owns this engine.
  void handle(const EngineTask& task, std::vector<Outgoing>* out);
  // Blocks when the engine is behind (backpressure on the dispatcher and, through it, on the workers).
  void submit(EngineTask task);

 private:
  void run();
  void resetStores();

  const int index_;
  std::unique_ptr<kernels::Reducer> reducer_;
  const int num_workers_;
  const ShardPlace checkpoints_;
  MemoryBudget* const budget_;
  const bool skip_zeros_;
  SumCounts sum_counts_;  // kept across resetStores(): a new generation's store counts on
  std::unique_ptr<SumStore> store_;
  std::unique_ptr<ParamStore> params_;
  Transport* transport_;
  PushPacer* const pacer_;
  BoundedQueue<EngineTask> queue_;
  std::atomic<bool> closed_{false};
  std::vector<Outgoing> out_;
  std::thread thread_;
};

}  // namespace zps
