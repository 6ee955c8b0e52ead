// What a ParamStore reports of its tables (server/param_store.h): the counters the server's stats
// and metrics read, each table's counts for `zps status`, and each table's size series.
#include "server/param_store.h"

namespace zps {

ParamCounters ParamStore::counters() const {
  ParamCounters c = counters_;
  c.table_rows = 0;
  for (const auto& [k, t] : tables_) c.table_rows += t.rows.size();
  c.rows_created = rows_created_;
  c.rows_evicted = rows_evicted_;
  return c;
}

std::map<std::string, TableCounts> ParamStore::tableCounts() const {
  std::map<std::string, TableCounts> all;
  for (const auto& [k, t] : tables_) {
    TableCounts c = t.counts;
    c.rows = t.rows.size();
    c.bytes = c.rows * t.rows.rowBytes();
    all[t.name] = c;
  }
  return all;
}

void ParamStore::registerMetrics(Table& t) {
  t.sizes = tableSizes().series(t.name);
  t.sizes.rows->add(static_cast<double>(t.rows.size()));
  t.sizes.bytes->add(static_cast<double>(t.rows.size() * t.rows.rowBytes()));
}

}  // namespace zps
