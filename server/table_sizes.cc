#include "server/table_sizes.h"

#include <algorithm>

namespace zps {

TableSizes::Series TableSizes::series(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = tables_.find(name); it != tables_.end()) return it->second;
  auto& m = metrics::metrics();
  const metrics::Labels l{{"table", name}};
  Series s;
  s.rows = &m.gauge("zps_server_table_rows", "Table rows this server holds", l);
  s.bytes = &m.gauge("zps_server_table_bytes",
                     "Bytes this server's rows of the table are charged (values, optimizer state, bookkeeping)", l);
  s.created =
      &m.counter("zps_server_table_rows_created_total", "Table rows created on first touch (again after eviction)", l);
  s.evicted = &m.counter("zps_server_table_rows_evicted_total",
                         "Table rows evicted to keep ZPS_TABLE_MEMORY_BYTES (re-created on next touch)", l);
  tables_.emplace(name, s);
  return s;
}

std::vector<pb::TableSize> TableSizes::snapshot(size_t max, uint64_t* left_out) const {
  std::vector<pb::TableSize> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, s] : tables_) {
      pb::TableSize t;
      t.set_name(name);
      t.set_rows(static_cast<uint64_t>(std::max(0.0, s.rows->value())));
      t.set_bytes(static_cast<uint64_t>(std::max(0.0, s.bytes->value())));
      t.set_created(static_cast<uint64_t>(s.created->value()));
      t.set_evicted(static_cast<uint64_t>(s.evicted->value()));
      all.push_back(std::move(t));
    }
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const pb::TableSize& a, const pb::TableSize& b) { return a.bytes() > b.bytes(); });
  *left_out = all.size() > max ? all.size() - max : 0;
  if (all.size() > max) all.resize(max);
  return all;
}

TableSizes& tableSizes() {
  static TableSizes* sizes = new TableSizes;  // never freed, like the metrics registry
  return *sizes;
}

}  // namespace zps
