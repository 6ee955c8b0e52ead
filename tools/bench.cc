// `zps bench`: push-pull latency and goodput over a list of sizes, printed as a table in the style of
// nccl-tests (self-describing header, a #wrong column, a pass/fail footer, non-zero exit on failure).
// Every worker runs the same iteration counts: worker 0 picks them and shares them through a push-pull
// in which only it contributes, so the benchmark needs nothing beyond the public API.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "tools/programs.h"
#include "tools/worker_program.h"

DECLARE_string(sizes);

DEFINE_string(mode, "pushpull", "bench: pushpull, push or pull");
DEFINE_double(min_time, 0.5, "bench: seconds to measure each size for (at least --min_iters)");
DEFINE_int32(min_iters, 5, "bench: fewest timed iterations per size");
DEFINE_int32(max_iters, 2000, "bench: most timed iterations per size");
DEFINE_int32(warmup_iters, 2, "bench: untimed iterations per size");
DEFINE_string(json, "", "bench: also write the results as JSON to this file");

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  size_t bytes;
  size_t partitions;
  int iters;
  double p50_us, p99_us, goodput_gbs;
  uint64_t wrong;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(std::ceil(p / 100.0 * v.size())) - 1;
  return v[std::min(idx, v.size() - 1)];
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
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (FLAGS_mode == "push") {
    ZPS_ASSIGN_OR_RETURN(Handle p, w.pull(t, out.data()));
    ZPS_RETURN_IF_ERROR(w.wait(p));
  }
  return Status::OK();
}

Status runBench(Worker& w, const std::vector<size_t>& sizes, bool* all_correct) {
  TensorId control;
  ZPS_ASSIGN_OR_RETURN(control, w.declare("bench/iterations", sizeof(int64_t), DType::kInt64));
  std::vector<std::pair<size_t, TensorId>> tensors;
  for (size_t s : sizes) {
    size_t bytes = std::max<size_t>(4, s / 4 * 4);
    ZPS_ASSIGN_OR_RETURN(TensorId t, w.declare("bench/" + std::to_string(bytes), bytes, DType::kFloat32));
    tensors.emplace_back(bytes, t);
  }
  std::vector<Row> rows;
  uint64_t round = 0;
  for (auto [bytes, t] : tensors) {
    size_t n = bytes / 4;
    std::vector<float> in(n), out(n);
    uint64_t wrong = 0;
    std::vector<double> lat;
    auto iterate = [&](bool timed) -> Status {
      ++round;
      // Every worker contributes rank+1 plus a round-dependent offset: the sum is exact in float32.
      float mine = static_cast<float>(w.rank() + 1 + static_cast<int>(round % 4));
      std::fill(in.begin(), in.end(), mine);
      double expect = w.numWorkers() * (w.numWorkers() + 1) / 2.0 + w.numWorkers() * static_cast<double>(round % 4);
      double secs = 0;
      ZPS_RETURN_IF_ERROR(step(w, t, in, out, &secs));
      for (float v : out) wrong += (v != expect);
      if (timed) lat.push_back(secs);
      return Status::OK();
    };
    auto warm_start = Clock::now();
    for (int i = 0; i < std::max(1, FLAGS_warmup_iters); ++i) ZPS_RETURN_IF_ERROR(iterate(false));
    double per_iter = std::chrono::duration<double>(Clock::now() - warm_start).count() / std::max(1, FLAGS_warmup_iters);
    int64_t mine = 0;
    if (w.rank() == 0)
      mine = std::clamp<int64_t>(static_cast<int64_t>(FLAGS_min_time / std::max(per_iter, 1e-6)), FLAGS_min_iters,
                                 FLAGS_max_iters);
    int64_t iters = 0;
    ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(control, &mine, &iters));
    ZPS_RETURN_IF_ERROR(w.wait(h));
    wrong = 0;  // warm-up values were checked too, but only timed iterations are reported
    for (int64_t i = 0; i < iters; ++i) ZPS_RETURN_IF_ERROR(iterate(true));
    Row r;
    r.bytes = bytes;
    r.partitions = w.partitions(t).size();
    r.iters = static_cast<int>(iters);
    r.p50_us = percentile(lat, 50) * 1e6;
    r.p99_us = percentile(lat, 99) * 1e6;
    r.goodput_gbs = bytes / (r.p50_us * 1e-6) / 1e9;
    r.wrong = wrong;
    rows.push_back(r);
    if (wrong > 0) *all_correct = false;
  }
  if (w.rank() == 0) {
    std::printf("# zps bench: mode %s, %d workers, %d servers, float32, partition %zu B\n", FLAGS_mode.c_str(),
                w.numWorkers(), w.numServers(), w.partitionBytes());
    std::printf("# goodput = size / p50 latency per worker (GB = 1e9 bytes)\n#\n");
    std::printf("# %12s %10s %7s %11s %11s %14s %7s\n", "size(B)", "partitions", "iters", "p50(us)", "p99(us)",
                "goodput(GB/s)", "#wrong");
    uint64_t total_wrong = 0;
    for (const auto& r : rows) {
      std::printf("  %12zu %10zu %7d %11.1f %11.1f %14.3f %7llu\n", r.bytes, r.partitions, r.iters, r.p50_us, r.p99_us,
                  r.goodput_gbs, static_cast<unsigned long long>(r.wrong));
      total_wrong += r.wrong;
    }
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong),
                total_wrong == 0 ? "OK" : "FAILED");
    std::printf("# zps bench: %s\n", total_wrong == 0 ? "PASS" : "FAIL");
    std::fflush(stdout);
    if (!FLAGS_json.empty()) {
      std::ofstream f(FLAGS_json);
      if (!f) return InvalidArgument("--json: cannot write " + FLAGS_json);
      f << "{\"mode\":\"" << FLAGS_mode << "\",\"workers\":" << w.numWorkers() << ",\"servers\":" << w.numServers()
        << ",\"dtype\":\"float32\",\"partition_bytes\":" << w.partitionBytes() << ",\"rows\":[";
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        f << (i ? "," : "") << "{\"bytes\":" << r.bytes << ",\"partitions\":" << r.partitions << ",\"iters\":" << r.iters
          << ",\"p50_us\":" << r.p50_us << ",\"p99_us\":" << r.p99_us << ",\"goodput_gbs\":" << r.goodput_gbs
          << ",\"wrong\":" << r.wrong << "}";
      }
      f << "],\"pass\":" << (total_wrong == 0 ? "true" : "false") << "}\n";
    }
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
  auto sizes = parseSizeList("--sizes", FLAGS_sizes.empty() ? "4K,64K,1M,4M,16M" : FLAGS_sizes);
  if (!sizes.ok()) {
    std::cerr << "zps bench: " << sizes.status().message() << std::endl;
    return 2;
  }
  return runWorkerProgram("bench", [&](Worker& w) -> Status {
    bool correct = true;
    ZPS_RETURN_IF_ERROR(runBench(w, *sizes, &correct));
    if (!correct) return InternalError("bench saw wrong values");
    return Status::OK();
  });
}

}  // namespace zps
