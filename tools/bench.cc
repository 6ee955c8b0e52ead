// `zps bench`: push-pull latency and goodput over a list of sizes, printed as a table in the style of
// nccl-tests (self-describing header, a #wrong column, a pass/fail footer, non-zero exit on failure).
// Every worker runs the same iteration counts: worker 0 picks them and shares them through a push-pull
// in which only it contributes, so the benchmark needs nothing beyond the public API.
//
// Besides latency it reports what the servers spent (Worker::serverStats, read before and after each
// size): server CPU time per pushed byte and the speed of the server's additions; and, in the footer,
// the peak resident memory of the servers and of every worker.
//
// --model resnet50|bert-base runs a training-shaped round instead: one push-pull per gradient tensor of
// the model, issued in backward order, against one fused tensor of the same total bytes, alternating
// so both see the same machine. With --compute_ms it runs training-shaped iterations with simulated
// compute instead, FIFO against priority scheduling (tools/bench/overlap.h).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "ps/common/process_stats.h"
#include "tools/bench/model_shapes.h"
#include "tools/bench/overlap.h"
#include "tools/command_line.h"
#include "tools/programs.h"
#include "tools/worker_program.h"

ZPS_FLAG(bench, std::string, sizes, "4K,64K,1M,4M,16M", "tensor sizes, e.g. 1,4K,1M+3 (K/M/G suffixes; +N adds bytes)");
ZPS_FLAG(bench, std::string, model, "", "push-pull the tensors of a model instead of --sizes: resnet50 or bert-base");
ZPS_FLAG(bench, std::string, mode, "pushpull", "pushpull, push or pull");
ZPS_FLAG(bench, double, min_time, 0.5, "seconds to measure each size for (at least --min_iters)");
ZPS_FLAG(bench, int32_t, min_iters, 5, "fewest timed iterations per size");
ZPS_FLAG(bench, int32_t, max_iters, 2000, "most timed iterations per size");
ZPS_FLAG(bench, int32_t, warmup_iters, 2, "untimed iterations per size");
ZPS_FLAG(bench, std::string, json, "", "also write the results as JSON to this file");
ZPS_FLAG(bench, std::string, compute_ms, "",
         "with --model: simulated compute per iteration in ms, or 'comm' for the measured communication time; "
         "compares FIFO and priority scheduling with overlap (docs/performance.md#priority-scheduling)");
ZPS_FLAG(bench, double, link_mbit, 0,
         "with --compute_ms: each host's link rate in Mbit/s, for the communication bound");

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Row {
  std::string label;  // the model's name for --model rows, empty for sizes
  size_t bytes;
  size_t messages;  // requests per iteration (partitions)
  int iters;
  double p50_us, p99_us, goodput_gbs;
  double server_ns_per_byte;  // server CPU time / bytes pushed to it (negative: nothing pushed)
  double sum_gbs;             // server addition speed (negative: no additions, e.g. one worker)
  uint64_t wrong;
  bool checked = true;  // false: topk/randomk pushes are lossy, so values cannot match the exact sum
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(std::ceil(p / 100.0 * v.size())) - 1;
  return v[std::min(idx, v.size() - 1)];
}

// Sums of the servers' counters, for differences over one row.
struct ServerTotals {
  uint64_t cpu_ns = 0, pushed = 0, summed = 0, sum_ns = 0, peak_rss = 0;
};

StatusOr<ServerTotals> serverTotals(Worker& w) {
  ZPS_ASSIGN_OR_RETURN(auto stats, w.serverStats());
  ServerTotals t;
  for (const auto& s : stats) {
    t.cpu_ns += s.cpu_ns;
    t.pushed += s.pushed_bytes;
    t.summed += s.summed_bytes;
    t.sum_ns += s.sum_ns;
    t.peak_rss = std::max(t.peak_rss, s.peak_rss_bytes);
  }
  return t;
}

void fillServerColumns(const ServerTotals& before, const ServerTotals& after, Row* r) {
  uint64_t pushed = after.pushed - before.pushed;
  r->server_ns_per_byte = pushed > 0 ? static_cast<double>(after.cpu_ns - before.cpu_ns) / pushed : -1;
  uint64_t sum_ns = after.sum_ns - before.sum_ns;
  r->sum_gbs = sum_ns > 0 ? static_cast<double>(after.summed - before.summed) / sum_ns : -1;
}

// Every worker runs the same number of iterations: worker 0's choice, shared through a push-pull to
// which only it contributes.
StatusOr<int64_t> agreeIterations(Worker& w, TensorId control, double seconds_per_iter) {
  int64_t mine = 0;
  if (w.rank() == 0)
    mine = std::clamp<int64_t>(static_cast<int64_t>(FLAGS_min_time / std::max(seconds_per_iter, 1e-6)), FLAGS_min_iters,
                               FLAGS_max_iters);
  int64_t iters = 0;
  ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(control, &mine, &iters));
  ZPS_RETURN_IF_ERROR(w.wait(h));
  return iters;
}

// Every worker contributes rank+1 plus a round-dependent offset: the sum is exact in float32.
float contribution(const Worker& w, uint64_t round) {
  return static_cast<float>(w.rank() + 1 + static_cast<int>(round % 4));
}
double expectedSum(const Worker& w, uint64_t round) {
  return w.numWorkers() * (w.numWorkers() + 1) / 2.0 + w.numWorkers() * static_cast<double>(round % 4);
}
// fp16 carries the bench's small integers exactly; topk and randomk send a part of each push per round.
bool valuesExact(const Worker& w, TensorId t) {
  const Compressor c = w.compressorOf(t);
  return c == Compressor::kNone || c == Compressor::kFp16;
}
uint64_t countWrong(const std::vector<float>& out, size_t from, size_t n, double expect) {
  uint64_t wrong = 0;
  for (size_t i = from; i < from + n; ++i) wrong += (out[i] != expect);
  return wrong;
}

// One timed step in the chosen mode; pull mode pushes untimed first so there is a round to pull.
Status step(Worker& w, TensorId t, const std::vector<float>& in, std::vector<float>& out, double* seconds) {
  if (FLAGS_mode == "pull") {
    ZPS_ASSIGN_OR_RETURN(Handle p, w.push(t, in.data()));
    ZPS_RETURN_IF_ERROR(w.wait(p));
  }
  auto start = Clock::now();
  Handle h;
  if (FLAGS_mode == "pushpull") {
    ZPS_ASSIGN_OR_RETURN(h, w.pushPull(t, in.data(), out.data()));
  } else if (FLAGS_mode == "push") {
    ZPS_ASSIGN_OR_RETURN(h, w.push(t, in.data()));
  } else {
    ZPS_ASSIGN_OR_RETURN(h, w.pull(t, out.data()));
  }
  ZPS_RETURN_IF_ERROR(w.wait(h));
  *seconds = secondsSince(start);
  if (FLAGS_mode == "push") {
    ZPS_ASSIGN_OR_RETURN(Handle p, w.pull(t, out.data()));
    ZPS_RETURN_IF_ERROR(w.wait(p));
  }
  return Status::OK();
}

Row summarize(std::string label, size_t bytes, size_t messages, const std::vector<double>& lat, uint64_t wrong) {
  Row r;
  r.label = std::move(label);
  r.bytes = bytes;
  r.messages = messages;
  r.iters = static_cast<int>(lat.size());
  r.p50_us = percentile(lat, 50) * 1e6;
  r.p99_us = percentile(lat, 99) * 1e6;
  r.goodput_gbs = bytes / (r.p50_us * 1e-6) / 1e9;
  r.wrong = wrong;
  return r;
}

Status benchSizes(Worker& w, TensorId control, const std::vector<size_t>& sizes, std::vector<Row>* rows,
                  std::vector<TensorId>* declared) {
  std::vector<std::pair<size_t, TensorId>> tensors;
  for (size_t s : sizes) {
    size_t bytes = std::max<size_t>(4, s / 4 * 4);
    ZPS_ASSIGN_OR_RETURN(TensorId t, w.declare("bench/" + std::to_string(bytes), bytes, DType::kFloat32));
    tensors.emplace_back(bytes, t);
    declared->push_back(t);
  }
  uint64_t round = 0;
  for (auto [bytes, t] : tensors) {
    size_t n = bytes / 4;
    std::vector<float> in(n), out(n);
    uint64_t wrong = 0;
    const bool checked = valuesExact(w, t);
    std::vector<double> lat;
    auto iterate = [&](bool timed) -> Status {
      ++round;
      std::fill(in.begin(), in.end(), contribution(w, round));
      double secs = 0;
      ZPS_RETURN_IF_ERROR(step(w, t, in, out, &secs));
      if (checked) wrong += countWrong(out, 0, n, expectedSum(w, round));
      if (timed) lat.push_back(secs);
      return Status::OK();
    };
    auto warm_start = Clock::now();
    for (int i = 0; i < std::max(1, FLAGS_warmup_iters); ++i) ZPS_RETURN_IF_ERROR(iterate(false));
    ZPS_ASSIGN_OR_RETURN(int64_t iters,
                         agreeIterations(w, control, secondsSince(warm_start) / std::max(1, FLAGS_warmup_iters)));
    wrong = 0;  // warm-up values were checked too, but only timed iterations are reported
    ZPS_ASSIGN_OR_RETURN(ServerTotals before, serverTotals(w));
    for (int64_t i = 0; i < iters; ++i) ZPS_RETURN_IF_ERROR(iterate(true));
    ZPS_ASSIGN_OR_RETURN(ServerTotals after, serverTotals(w));
    Row r = summarize("", bytes, w.partitions(t).size(), lat, wrong);
    r.checked = checked;
    fillServerColumns(before, after, &r);
    rows->push_back(r);
  }
  return Status::OK();
}

// A training-shaped round: every gradient of the model, pushed in backward order as backprop would
// produce them, then waited for; against one fused tensor of the same bytes. Both run in the same
// loop, alternating, so a noisy machine slows them alike.
Status benchModel(Worker& w, TensorId control, const std::string& model, std::vector<Row>* rows,
                  std::vector<TensorId>* declared) {
  ZPS_ASSIGN_OR_RETURN(std::vector<ModelTensor> grads, modelTensors(model));
  size_t total = 0;
  std::vector<std::pair<size_t, TensorId>> slices;  // (float offset, tensor), in backward order
  for (const auto& g : grads) {
    ZPS_ASSIGN_OR_RETURN(TensorId t, w.declare("bench/" + model + "/" + g.name, g.elements * 4, DType::kFloat32));
    slices.emplace_back(total, t);
    declared->push_back(t);
    total += g.elements;
  }
  ZPS_ASSIGN_OR_RETURN(TensorId fused, w.declare("bench/" + model + "/fused", total * 4, DType::kFloat32));
  declared->push_back(fused);
  size_t model_messages = 0;
  for (const auto& [offset, t] : slices) model_messages += w.partitions(t).size();
  // The per-tensor round and the fused round share one input and one output buffer.
  std::vector<float> in(total), out(total);
  uint64_t round = 0, wrong_model = 0, wrong_fused = 0;
  bool model_checked = true;
  for (const auto& slice : slices) model_checked = model_checked && valuesExact(w, slice.second);
  const bool fused_checked = valuesExact(w, fused);
  std::vector<double> lat_model, lat_fused;
  auto iterate = [&](bool timed) -> Status {
    ++round;
    std::fill(in.begin(), in.end(), contribution(w, round));
    const double expect = expectedSum(w, round);
    auto start = Clock::now();
    std::vector<Handle> handles;
    for (const auto& [offset, t] : slices) {
      ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(t, in.data() + offset, out.data() + offset));
      handles.push_back(h);
    }
    for (Handle h : handles) ZPS_RETURN_IF_ERROR(w.wait(h));
    double model_secs = secondsSince(start);
    if (model_checked) wrong_model += countWrong(out, 0, total, expect);
    start = Clock::now();
    ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(fused, in.data(), out.data()));
    ZPS_RETURN_IF_ERROR(w.wait(h));
    double fused_secs = secondsSince(start);
    if (fused_checked) wrong_fused += countWrong(out, 0, total, expect);
    if (timed) {
      lat_model.push_back(model_secs);
      lat_fused.push_back(fused_secs);
    }
    return Status::OK();
  };
  auto warm_start = Clock::now();
  for (int i = 0; i < std::max(1, FLAGS_warmup_iters); ++i) ZPS_RETURN_IF_ERROR(iterate(false));
  ZPS_ASSIGN_OR_RETURN(int64_t iters,
                       agreeIterations(w, control, secondsSince(warm_start) / std::max(1, FLAGS_warmup_iters)));
  wrong_model = wrong_fused = 0;
  ZPS_ASSIGN_OR_RETURN(ServerTotals before, serverTotals(w));
  for (int64_t i = 0; i < iters; ++i) ZPS_RETURN_IF_ERROR(iterate(true));
  ZPS_ASSIGN_OR_RETURN(ServerTotals after, serverTotals(w));
  rows->push_back(summarize(model + " (" + std::to_string(grads.size()) + " tensors)", total * 4, model_messages,
                            lat_model, wrong_model));
  rows->push_back(summarize(model + " fused", total * 4, w.partitions(fused).size(), lat_fused, wrong_fused));
  (*rows)[rows->size() - 2].checked = model_checked;
  rows->back().checked = fused_checked;
  for (size_t i = rows->size() - 2; i < rows->size(); ++i) fillServerColumns(before, after, &(*rows)[i]);
  return Status::OK();
}

// Every worker's peak RSS, gathered with a push-pull in which each worker fills only its own slot.
StatusOr<std::vector<int64_t>> workerPeakRss(Worker& w) {
  ZPS_ASSIGN_OR_RETURN(TensorId t, w.declare("bench/worker-rss", w.numWorkers() * sizeof(int64_t), DType::kInt64));
  std::vector<int64_t> mine(w.numWorkers(), 0), all(w.numWorkers(), 0);
  mine[w.rank()] = static_cast<int64_t>(peakRssBytes());
  ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(t, mine.data(), all.data()));
  ZPS_RETURN_IF_ERROR(w.wait(h));
  return all;
}

std::string number(double v, const char* format) {
  if (v < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

Status report(Worker& w, const std::vector<Row>& rows, uint64_t declared_bytes, uint64_t server_start_rss,
              uint64_t server_rss, const std::vector<int64_t>& worker_rss, const std::string& model) {
  uint64_t total_wrong = 0;
  size_t unchecked = 0;
  for (const auto& r : rows) {
    total_wrong += r.wrong;
    unchecked += r.checked ? 0 : 1;
  }
  const bool pass = total_wrong == 0;
  std::printf("# zps bench: mode %s, %d workers, %d servers, float32, partition %zu B\n",
              model.empty() ? FLAGS_mode.c_str() : ("pushpull, model " + model).c_str(), w.numWorkers(), w.numServers(),
              w.partitionBytes());
  std::printf("# goodput = size / p50 latency per worker (GB = 1e9 bytes); srv ns/B = server CPU time per byte\n");
  std::printf("# pushed to it; sum GB/s = server additions (dst += src), '-' when there were none (1 worker)\n#\n");
  std::printf("# %12s %8s %7s %11s %11s %14s %9s %8s %7s\n", "size(B)", "messages", "iters", "p50(us)", "p99(us)",
              "goodput(GB/s)", "srv ns/B", "sum GB/s", "#wrong");
  for (const auto& r : rows) {
    std::printf("  %12zu %8zu %7d %11.1f %11.1f %14.3f %9s %8s %7s", r.bytes, r.messages, r.iters, r.p50_us, r.p99_us,
                r.goodput_gbs, number(r.server_ns_per_byte, "%.3f").c_str(), number(r.sum_gbs, "%.2f").c_str(),
                r.checked ? std::to_string(r.wrong).c_str() : "-");
    std::printf(r.label.empty() ? "\n" : "  %s\n", r.label.c_str());
  }
  if (!model.empty() && FLAGS_compute_ms.empty() && rows.size() >= 2)
    std::printf("# %s round / fused round (p50): %.2f\n", model.c_str(), rows[0].p50_us / rows[1].p50_us);
  std::printf(
      "# peak RSS: servers %.1f MiB (largest; %.1f MiB before the first size; it holds %.1f MiB of keys), workers",
      server_rss / 1048576.0, server_start_rss / 1048576.0, declared_bytes / 1048576.0);
  for (int64_t b : worker_rss) std::printf(" %.1f", b / 1048576.0);
  std::printf(" MiB\n");
  if (unchecked > 0)
    std::printf(
        "# #wrong '-': %zu rows not checked, their tensors use lossy compression (topk/randomk, ZPS_COMPRESSOR)\n",
        unchecked);
  std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
              pass ? "OK" : "FAILED");
  std::printf("# zps bench: %s\n", pass ? "PASS" : "FAIL");
  std::fflush(stdout);
  if (FLAGS_json.empty()) return Status::OK();
  std::ofstream f(FLAGS_json);
  if (!f) return InvalidArgument("--json: cannot write " + FLAGS_json);
  f << "{\"mode\":\"" << FLAGS_mode << "\",\"model\":\"" << model << "\",\"workers\":" << w.numWorkers()
    << ",\"servers\":" << w.numServers() << ",\"dtype\":\"float32\",\"partition_bytes\":" << w.partitionBytes()
    << ",\"server_peak_rss_bytes\":" << server_rss << ",\"server_start_rss_bytes\":" << server_start_rss
    << ",\"declared_bytes\":" << declared_bytes << ",\"worker_peak_rss_bytes\":[";
  for (size_t i = 0; i < worker_rss.size(); ++i) f << (i ? "," : "") << worker_rss[i];
  f << "],\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    f << (i ? "," : "") << "{\"label\":\"" << r.label << "\",\"bytes\":" << r.bytes << ",\"messages\":" << r.messages
      << ",\"iters\":" << r.iters << ",\"p50_us\":" << r.p50_us << ",\"p99_us\":" << r.p99_us
      << ",\"goodput_gbs\":" << r.goodput_gbs << ",\"server_ns_per_byte\":" << r.server_ns_per_byte
      << ",\"sum_gbs\":" << r.sum_gbs << ",\"wrong\":" << r.wrong << ",\"checked\":" << (r.checked ? "true" : "false")
      << "}";
  }
  f << "],\"pass\":" << (pass ? "true" : "false") << "}\n";
  return Status::OK();
}

// The overlap comparison's rows in the main table: communication only and with compute, per schedule.
void overlapRows(const OverlapResult& r, const std::string& model, std::vector<Row>* rows) {
  for (const auto& s : r.schedules) {
    rows->push_back(summarize(model + " " + s.name + ", communication only", r.bytes, s.messages, s.comm, 0));
    rows->push_back(summarize(model + " " + s.name + " + compute", r.bytes, s.messages, s.overlap, s.wrong));
    for (size_t i = rows->size() - 2; i < rows->size(); ++i) {
      (*rows)[i].server_ns_per_byte = -1;  // the servers' counters cover both schedules: not shown
      (*rows)[i].sum_gbs = -1;
    }
  }
}

Status runBench(Worker& w, const std::vector<size_t>& sizes, const std::string& model,
                const std::optional<OverlapOptions>& overlap_options, bool* all_correct) {
  TensorId control;
  ZPS_ASSIGN_OR_RETURN(control, w.declare("bench/iterations", sizeof(int64_t), DType::kInt64));
  ZPS_ASSIGN_OR_RETURN(ServerTotals at_start, serverTotals(w));
  std::vector<Row> rows;
  std::vector<TensorId> tensors = {control};
  std::optional<OverlapResult> overlap;
  if (model.empty()) {
    ZPS_RETURN_IF_ERROR(benchSizes(w, control, sizes, &rows, &tensors));
  } else if (overlap_options) {
    ZPS_ASSIGN_OR_RETURN(overlap, runOverlap(w, control, *overlap_options, &tensors));
    overlapRows(*overlap, model, &rows);
  } else {
    ZPS_RETURN_IF_ERROR(benchModel(w, control, model, &rows, &tensors));
  }
  ZPS_ASSIGN_OR_RETURN(std::vector<int64_t> worker_rss, workerPeakRss(w));
  // The RSS goal is per server: the bytes of the keys it holds (the fullest server's).
  std::vector<uint64_t> held(w.numServers(), 0);
  for (TensorId t : tensors)
    for (const auto& p : w.partitions(t)) held[p.server] += p.bytes;
  const uint64_t declared = *std::max_element(held.begin(), held.end());
  ZPS_ASSIGN_OR_RETURN(ServerTotals servers, serverTotals(w));
  for (const auto& r : rows)
    if (r.wrong > 0) *all_correct = false;
  if (w.rank() == 0) {
    ZPS_RETURN_IF_ERROR(report(w, rows, declared, at_start.peak_rss, servers.peak_rss, worker_rss, model));
    if (overlap) printOverlap(*overlap, *overlap_options);
    std::fflush(stdout);
  }
  return Status::OK();
}

}  // namespace

int benchMain() {
  if (FLAGS_mode != "pushpull" && FLAGS_mode != "push" && FLAGS_mode != "pull") {
    std::cerr << "zps bench: --mode must be pushpull, push or pull" << std::endl;
    return 2;
  }
  if (FLAGS_min_iters < 1 || FLAGS_max_iters < FLAGS_min_iters) {
    std::cerr << "zps bench: need 1 <= --min_iters <= --max_iters" << std::endl;
    return 2;
  }
  const std::string model = FLAGS_model;
  if (!model.empty()) {
    if (auto shapes = modelTensors(model); !shapes.ok()) {
      std::cerr << "zps bench: " << shapes.status().message() << std::endl;
      return 2;
    }
    if (FLAGS_mode != "pushpull") {
      std::cerr << "zps bench: --model runs push-pull rounds; drop --mode " << FLAGS_mode << std::endl;
      return 2;
    }
  }
  std::optional<OverlapOptions> overlap;
  if (!FLAGS_compute_ms.empty()) {
    overlap.emplace();
    overlap->model = model;
    overlap->link_mbit = FLAGS_link_mbit;
    overlap->warmup_iters = std::max(1, FLAGS_warmup_iters);
    overlap->iters = FLAGS_min_iters;
    char* end = nullptr;
    overlap->compute_ms = FLAGS_compute_ms == "comm" ? -1 : std::strtod(FLAGS_compute_ms.c_str(), &end);
    if (model.empty() || (end != nullptr && (*end != '\0' || overlap->compute_ms < 0 || overlap->compute_ms > 1e6)) ||
        FLAGS_link_mbit < 0) {
      std::cerr << "zps bench: --compute_ms needs --model, and is 'comm' or milliseconds in [0, 1e6]; --link_mbit >= 0"
                << std::endl;
      return 2;
    }
  }
  auto sizes = parseSizeList("--sizes", FLAGS_sizes);
  if (!sizes.ok()) {
    std::cerr << "zps bench: " << sizes.status().message() << std::endl;
    return 2;
  }
  return runWorkerProgram("bench", [&](Worker& w) -> Status {
    bool correct = true;
    ZPS_RETURN_IF_ERROR(runBench(w, *sizes, model, overlap, &correct));
    if (!correct) return InternalError("bench saw wrong values");
    return Status::OK();
  });
}

}  // namespace zps
