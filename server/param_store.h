// ParamStore: parameter-server mode ("param" keys) for the tables of one engine thread. A table holds
// embedding rows keyed by uint64; rows are created on first touch with a deterministic initialiser and
// updated on the server by an optimizer (kernels/optimizer.h). Owned and called by exactly one server
// engine thread, like SumStore.
//
// Synchronous tables (the default) count rounds, one per training step: round r's pushes from every
// worker are summed per row, then applied once; a pull for round r waits until round r-1 is applied, so
// every worker reads the same rows (a prefetch asks for round r + 1 before its worker's push of round
// r, and is held until round r is applied). Asynchronous tables apply each push at once and serve
// pulls at once, each push once: a number (push_seq) its pusher's SequenceWindow has seen is
// acknowledged, not applied.
// Workers push to every server every round (an empty push when none of their rows live there), so each
// server can count its rounds. With several processes per worker node (ZPS_LOCAL_SIZE, carried by the
// DECLARE) every local rank is a table client of its own: sparse rows gain nothing from an on-node
// reduction, so a round waits for one push per (worker, local rank).
//
// Memory: with a table budget (ZPS_TABLE_MEMORY_BYTES, MemoryBudget's TableRowPolicy) a row that does
// not fit makes room by evicting the least recently used rows of this store's tables (pulled, pushed
// or updated least recently; rows the request itself touches are never evicted for it). An evicted
// row is forgotten: its next touch creates it again with its initial value and fresh optimizer state,
// as if it had never been seen. Rows are charged RowStore::rowBytes each.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/optimizer.h"
#include "kernels/reducer.h"
#include "ps/node/metrics.h"
#include "server/memory_budget.h"
#include "server/row_store.h"
#include "server/sequence_window.h"
#include "server/sum_store.h"
#include "server/table_checkpoint.h"
#include "server/table_sizes.h"

namespace zps {

struct ParamCounters {
  uint64_t rows_pulled = 0;
  uint64_t rows_pushed = 0;
  uint64_t bytes_in = 0;   // keys + gradient rows received
  uint64_t bytes_out = 0;  // rows sent
  uint64_t table_rows = 0;
  uint64_t rows_created = 0;  // created on first touch (again after an eviction); restored rows aside
  uint64_t rows_evicted = 0;
};

// One table's rows on this store (TableSizes has them for the metrics and the heartbeat).
struct TableCounts {
  uint64_t rows = 0;
  uint64_t bytes = 0;  // rows x RowStore::rowBytes
  uint64_t created = 0;
  uint64_t evicted = 0;
  uint64_t checkpoint_rows = 0;  // rows in the last checkpoint written (changed ones, for an increment)
};

class ParamStore {
 public:
  static constexpr uint64_t kMaxRoundsAhead = 2;
  // A pull of round r waits for round r - 1. A worker whose push of round p was accepted (p <=
  // completed + kMaxRoundsAhead) may prefetch the rows of its next step, a pull of round p + 2
  // (Worker::pullRowsAhead): so pulls may wait for one round more than a push may open. Past that a
  // pull is refused (no worker can be that far ahead: its pushes would have been refused first).
  static constexpr uint64_t kMaxPullRoundsAhead = kMaxRoundsAhead + 2;

  // `place` says where checkpoints go (an empty dir: none) and which server of how many this is.
  // `budget` (may be null) is charged for every table and row; a row is created only when it fits.
  // `engine` applies each synchronous round's updates (the server's reducer: CPU or CUDA); null
  // means the CPU. It must outlive the store.
  ParamStore(int num_workers, ShardPlace place, MemoryBudget* budget = nullptr, kernels::Reducer* engine = nullptr)
      : num_workers_(num_workers),
        server_rank_(static_cast<int>(place.server_rank)),
        place_(std::move(place)),
        engine_(engine),
        memory_(budget),
        max_shard_bytes_(budget != nullptr ? budget->cap() : kDefaultMaxShardBytes),
        budget_(budget),
        row_format_(budget != nullptr ? budget->tables().format : RowFormat::kFloat32) {}
  ~ParamStore();
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // DECLARE (mode param), PUSH_ROWS, PULL_ROWS and CHECKPOINT from local rank `local_rank` (its HELLO's)
  // of `worker`.
  void handle(PeerId peer, int worker, uint32_t local_rank, const wire::DataMessage& msg, std::vector<Outgoing>* out);
  ParamCounters counters() const;
  std::map<std::string, TableCounts> tableCounts() const;
  // Writes every synchronous table as of its last applied round (the final checkpoint on SIGTERM).
  void checkpointAll();

 private:
  struct Table {
    std::string name;
    uint32_t dim = 0;
    kernels::OptimizerConfig optimizer;
    float init_scale = 0;
    uint64_t init_seed = 0;
    bool async = false;
    uint32_t local_size = 1;  // processes per worker node: a sync round has num_workers x local_size pushers
    size_t state_floats = 0;  // optimizer state per parameter
    RowStore rows;
    TableCounts counts;
    TableSizes::Series sizes;  // null series until the table is declared (rows restored before it)
    uint64_t completed = 0;    // last applied round (sync)
    // Checkpoints: the newest step known to be complete (`latest` names it or a newer one: it was
    // restored, or a later checkpoint was asked for, which worker 0 does only after writing `latest`),
    // and the step of the last checkpoint asked for. Shards older than `committed` may go.
    uint64_t committed = 0;
    uint64_t requested = 0;
    // Incremental checkpoints: the step of this server's newest shard (written or restored), the
    // increments written since the last full shard, and for each kept step the full shard its chain
    // starts at (retention keeps the chain of `committed`).
    uint64_t last_written = 0;
    uint32_t increments = 0;
    std::map<uint64_t, uint64_t> chain_base;
    struct Round {
      struct Push {
        std::vector<uint64_t> keys;
        std::vector<float> grads;  // keys.size() x dim
      };
      std::vector<Push> by_pusher;  // by pusher (worker x local_size + local rank), summed in that order
      std::vector<bool> pushed;
      int count = 0;
    };
    std::map<uint64_t, Round> open;
    struct Parked {
      PeerId peer;
      pb::Data request;  // a row pull or a checkpoint
      std::vector<uint64_t> keys;
    };
    std::vector<Parked> parked;
    // Async tables: per pusher (worker x local_size + local rank), the pushes already applied; sized
    // at the first async push.
    std::vector<SequenceWindow> applied;
  };

  // *checkpoint_refused: the declaration failed because restoring its checkpoint refused a file
  // (kInvalidArgument naming it), not for a reason of the server's.
  Status declare(uint64_t key, uint32_t local_rank, const wire::DataMessage& msg, bool* checkpoint_refused);
  Status push(Table& t, int worker, uint32_t local_rank, const wire::DataMessage& msg);
  // An async table's push: its rows are applied at once, once per push_seq of the pusher.
  Status pushAsync(Table& t, size_t pusher, const wire::DataMessage& msg);
  int pushers(const Table& t) const { return num_workers_ * static_cast<int>(t.local_size); }
  void pullNow(Table& t, PeerId peer, const pb::Data& request, const std::vector<uint64_t>& keys,
               std::vector<Outgoing>* out);
  void applyRounds(uint64_t key, Table& t, std::vector<Outgoing>* out);
  // Applies one round's summed gradients to distinct rows (steps: each row's count after this update)
  // on the engine, or the CPU when it fails.
  void applyBatch(Table& t, const std::vector<uint32_t>& slots, const std::vector<uint64_t>& steps,
                  const std::vector<float>& grads);
  void serveParked(uint64_t key, Table& t, std::vector<Outgoing>* out);
  // Creates the rows of `keys` that do not exist yet, all or none, and marks every one used now. Past
  // the table budget it evicts rows other than these; when that cannot make room (or at the server's
  // memory cap) it refuses them, unless `force` (a round already acknowledged: created anyway).
  Status ensureRows(Table& t, const std::vector<uint64_t>& keys, bool force = false);
  // Takes `bytes` of the table budget, evicting rows used before `tick` (least recently used first,
  // over all of this store's tables) until they fit. False, with nothing evicted, when evicting all
  // but `pinned_bytes` (the request's own rows) would not make room.
  bool makeRoom(uint64_t bytes, uint64_t pinned_bytes, uint64_t tick, bool force);
  void evictRow(Table& t, uint32_t slot);
  uint32_t createRow(Table& t, uint64_t key, uint64_t tick);
  // The row of a key ensureRows made sure of.
  uint32_t slotOf(const Table& t, uint64_t key) const;
  void registerMetrics(Table& t);
  void applyRow(Table& t, uint64_t key, const float* grad);
  static TableLayout layoutOf(const Table& t);
  Status writeCheckpoint(Table& t, uint64_t step);
  // A checkpoint worker 0 asked for (CHECKPOINT): moves `committed` on, then writes.
  Status checkpointRequested(Table& t, uint64_t step);
  Status restore(Table& t, uint64_t step);

  // The largest shard file a store without a memory budget reads (tests, the fuzzer).
  static constexpr uint64_t kDefaultMaxShardBytes = uint64_t{1} << 30;

  const int num_workers_;
  const int server_rank_;
  const ShardPlace place_;
  kernels::Reducer* const engine_;
  std::unordered_map<uint64_t, Table> tables_;
  ParamCounters counters_;
  MemoryCharge memory_;
  const uint64_t max_shard_bytes_;
  MemoryBudget* const budget_;
  const RowFormat row_format_;
  uint64_t clock_ = 0;                            // one tick per request that touches rows (least-recently-used order)
  uint64_t rows_charged_ = 0;                     // of the table budget, given back when the store goes away
  uint64_t rows_created_ = 0, rows_evicted_ = 0;  // every table ever held, for counters()
};

}  // namespace zps
