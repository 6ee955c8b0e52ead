// TableSizes: per table of this server process, the rows held, the bytes they are charged (as the
// table budget counts them: RowStore::rowBytes each, values, optimizer state and bookkeeping), and the
// rows created and evicted. They are the metrics zps_server_table_rows, _bytes, _rows_created_total and
// _rows_evicted_total, and they travel to the scheduler with the heartbeat for `zps status`.
//
// Process-wide like the metrics registry it writes to: a ParamStore on an engine thread updates its
// table's series with atomics only, and the heartbeat thread reads them at any time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/node/metrics.h"

namespace zps {

class TableSizes {
 public:
  struct Series {
    metrics::Gauge* rows = nullptr;
    metrics::Gauge* bytes = nullptr;
    metrics::Counter* created = nullptr;
    metrics::Counter* evicted = nullptr;
  };
  // The series of table `name`, created on first use (takes a lock: once per table, not per row).
  Series series(const std::string& name);
  // Every table's sizes, the most bytes first, at most `max` of them; *left_out counts the rest.
  std::vector<pb::TableSize> snapshot(size_t max, uint64_t* left_out) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, Series> tables_;
};

// The process's tables.
TableSizes& tableSizes();

}  // namespace zps
