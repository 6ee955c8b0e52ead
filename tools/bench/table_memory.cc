// zps-table-memory: what server table rows cost, measured on the server's own row store (ParamStore,
// driven with the requests a worker sends, without the network in the way).
//
//   zps-table-memory rows IDS             memory per row: IDS distinct ids pushed into an unbounded
//                                         table, for each row format and optimizer, each in a process
//                                         of its own; prints resident bytes per row and what a row is
//                                         charged (RowStore::rowBytes)
//   zps-table-memory stream IDS BUDGET [FORMAT [OPTIMIZER]]
//                                         a stream of IDS ids never seen before (64-bit hashes of a
//                                         counter: no vocabulary) under ZPS_TABLE_MEMORY_BYTES=BUDGET;
//                                         prints rows held, created and evicted, bytes charged, the
//                                         resident memory the rows added, and ids per second; exits 1
//                                         when the rows charged exceed the budget or any count is off
//
// Each prints one JSON object per line (docs/tables.md reports them). Rows go through asynchronous
// pushes of 4096 ids with dim 16 (the DLRM shape), so the optimizer runs on every row.
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "ps/common/process_stats.h"
#include "server/param_store.h"

namespace zps {
namespace {

constexpr uint32_t kDim = 16;
constexpr size_t kBatch = 4096;
constexpr uint64_t kTableKey = 1;

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Resident memory now (VmRSS), in bytes, after the allocator has given back the pages it holds free:
// arrays that grew left their old copies in the heap, which is the allocator's, not the rows'.
uint64_t residentBytes() {
  malloc_trim(0);
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long pages = 0, resident = 0;
  const int read = std::fscanf(f, "%llu %llu", &pages, &resident);
  std::fclose(f);
  return read == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// A DECLARE of the table or a PUSH_ROWS of `keys` to it, as the codec hands them over.
wire::DataMessage request(pb::DataCommand command, const std::vector<uint64_t>& keys) {
  static uint64_t id = 0;
  wire::DataMessage m;
  m.data.set_request_id(++id);
  if (command == pb::CMD_DECLARE) {
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kTableKey);
    d->set_row_dim(kDim);
    d->set_num_elements(keys.size());
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  } else {
    pb::Rows* r = m.data.mutable_rows();
    r->set_push(command == pb::CMD_PUSH_ROWS);
    r->set_key(kTableKey);
    r->set_row_dim(kDim);
    r->set_count(keys.size());
  }
  m.dtype = DType::kFloat32;
  m.keys = Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t));
  return m;
}

struct Result {
  ParamCounters counters;
  TableCounts table;
  uint64_t rss_added = 0;
  double seconds = 0;
  bool ok = true;
};

Result streamIds(uint64_t ids, uint64_t budget_bytes, RowFormat format, kernels::OptimizerKind optimizer) {
  MemoryBudget budget(uint64_t{1} << 50, TableRowPolicy{budget_bytes, format});
  ParamStore store(1, ShardPlace{}, &budget);
  std::vector<Outgoing> out;
  auto declare = request(pb::CMD_DECLARE, {});
  pb::Declare* d = declare.data.mutable_declare();
  d->set_mode(pb::MODE_PARAM);
  d->set_name("stream");
  d->set_async(true);
  auto* o = d->mutable_optimizer();
  o->set_kind(static_cast<uint32_t>(optimizer));
  o->set_lr(0.01f);
  o->set_beta1(0.9f);
  o->set_beta2(0.999f);
  o->set_eps(1e-8f);
  o->set_initial_accumulator(0.1f);
  o->set_init_scale(0.05f);
  store.handle(1, 0, 0, declare, &out);
  Result r;
  if (out.empty() || !out.back().data.has_reply()) {
    std::fprintf(stderr, "zps-table-memory: the declaration was refused\n");
    r.ok = false;
    return r;
  }
  std::vector<float> grads(kBatch * kDim, 0.001f);
  std::vector<uint64_t> keys;
  const uint64_t rss_before = residentBytes();
  const auto start = std::chrono::steady_clock::now();
  uint64_t seq = 0;
  for (uint64_t next = 0; next < ids;) {
    keys.clear();
    for (; keys.size() < kBatch && next < ids; ++next) keys.push_back(splitmix64(next));
    auto push = request(pb::CMD_PUSH_ROWS, keys);
    push.data.mutable_rows()->set_push_seq(++seq);
    push.payload = Blob::copyOf(grads.data(), keys.size() * kDim * sizeof(float));
    out.clear();
    store.handle(1, 0, 0, push, &out);
    if (out.empty() || !out.back().data.has_reply()) {
      std::fprintf(stderr, "zps-table-memory: push %llu refused: %s\n", static_cast<unsigned long long>(seq),
                   out.empty() ? "no reply" : out.back().data.error().text().c_str());
      r.ok = false;
      return r;
    }
    if (budget_bytes > 0 && budget.rowsUsed() > budget_bytes) {
      std::fprintf(stderr, "zps-table-memory: %llu bytes of rows charged, over the budget\n",
                   static_cast<unsigned long long>(budget.rowsUsed()));
      r.ok = false;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.rss_added = residentBytes() - rss_before;
  r.counters = store.counters();
  r.table = store.tableCounts().at("stream");
  if (r.table.created != ids || r.table.evicted != ids - r.table.rows) {
    std::fprintf(stderr, "zps-table-memory: counts are off\n");
    r.ok = false;
  }
  return r;
}

void print(const char* mode, uint64_t ids, uint64_t budget, RowFormat format, kernels::OptimizerKind optimizer,
           const Result& r) {
  const uint64_t charged =
      RowStore::rowBytes(kDim, static_cast<uint32_t>(kernels::optimizerStateFloats(optimizer)), format);
  std::printf(
      "{\"mode\":\"%s\",\"ids\":%llu,\"budget_bytes\":%llu,\"format\":\"%s\",\"optimizer\":\"%s\",\"dim\":%u,"
      "\"rows_held\":%llu,\"rows_created\":%llu,\"rows_evicted\":%llu,\"bytes_charged\":%llu,"
      "\"charged_per_row\":%llu,\"resident_added\":%llu,\"resident_per_row\":%.1f,\"ids_per_sec\":%.0f,"
      "\"ok\":%s}\n",
      mode, static_cast<unsigned long long>(ids), static_cast<unsigned long long>(budget), rowFormatName(format),
      kernels::optimizerName(optimizer), kDim, static_cast<unsigned long long>(r.table.rows),
      static_cast<unsigned long long>(r.table.created), static_cast<unsigned long long>(r.table.evicted),
      static_cast<unsigned long long>(r.table.bytes), static_cast<unsigned long long>(charged),
      static_cast<unsigned long long>(r.rss_added),
      r.table.rows > 0 ? static_cast<double>(r.rss_added) / static_cast<double>(r.table.rows) : 0.0,
      r.seconds > 0 ? static_cast<double>(ids) / r.seconds : 0.0, r.ok ? "true" : "false");
  std::fflush(stdout);
}

int usage() {
  std::fprintf(stderr,
               "usage: zps-table-memory rows IDS | zps-table-memory stream IDS BUDGET [float32|float16|bfloat16 "
               "[sgd|momentum|adam|adagrad]]\n");
  return 2;
}

bool parseCount(const char* text, uint64_t* out) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) return false;
  *out = v;
  return true;
}

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  uint64_t ids = 0;
  if (!parseCount(argv[2], &ids)) return usage();
  const kernels::OptimizerKind all[] = {kernels::OptimizerKind::kSgd, kernels::OptimizerKind::kMomentum,
                                        kernels::OptimizerKind::kAdam, kernels::OptimizerKind::kAdagrad};
  if (mode == "rows" && argc == 3) {
    bool ok = true;
    for (RowFormat format : {RowFormat::kFloat32, RowFormat::kFloat16, RowFormat::kBfloat16}) {
      for (auto optimizer : all) {
        // A process each, so one configuration's freed memory does not hide the next one's growth.
        const pid_t child = fork();
        if (child == 0) {
          const Result r = streamIds(ids, 0, format, optimizer);
          print("rows", ids, 0, format, optimizer, r);
          std::_Exit(r.ok ? 0 : 1);
        }
        int status = 0;
        ok = child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
      }
    }
    return ok ? 0 : 1;
  }
  if (mode != "stream" || argc < 4 || argc > 6) return usage();
  uint64_t budget = 0;
  if (!parseCount(argv[3], &budget)) return usage();
  auto format = rowFormatFromName(argc > 4 ? argv[4] : "float32");
  if (!format.ok()) {
    std::fprintf(stderr, "zps-table-memory: %s\n", format.status().message().c_str());
    return 2;
  }
  auto optimizer = kernels::optimizerFromName(argc > 5 ? argv[5] : "adam");
  if (!optimizer.ok()) {
    std::fprintf(stderr, "zps-table-memory: %s\n", optimizer.status().message().c_str());
    return 2;
  }
  const Result r = streamIds(ids, budget, *format, *optimizer);
  print("stream", ids, budget, *format, *optimizer, r);
  return r.ok ? 0 : 1;
}

}  // namespace
}  // namespace zps

int main(int argc, char** argv) { return zps::main(argc, argv); }
