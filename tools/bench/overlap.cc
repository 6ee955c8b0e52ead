#include "tools/bench/overlap.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "tools/bench/model_shapes.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }
Clock::time_point after(Clock::time_point t, double seconds) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One declared copy of the model, in forward order (index 0 is the first layer).
struct ModelCopy {
  ScheduleTimes* times;
  std::vector<TensorId> ids;
  std::vector<Handle> handles;
  uint64_t round = 0;
};

struct Model {
  std::vector<size_t> elements, offsets;  // forward order; offsets in floats
  size_t total = 0;
  std::vector<float> in, out;
  // Each layer's share of the backward and forward compute (by parameters), in seconds.
  std::vector<double> backward_s, forward_s;
};

// Every worker contributes rank+1 plus a round-dependent offset: the sum is exact in float32.
float contribution(const Worker& w, uint64_t round) { return static_cast<float>(w.rank() + 1 + round % 4); }
float expectedSum(const Worker& w, uint64_t round) {
  const int n = w.numWorkers();
  return static_cast<float>(n * (n + 1) / 2 + n * (round % 4));
}

uint64_t countWrong(const Worker& w, const Model& m, uint64_t round) {
  const float expect = expectedSum(w, round);
  uint64_t wrong = 0;
  for (float v : m.out) wrong += (v != expect);
  return wrong;
}

// Every push-pull of the model in backward order at once, then every wait: communication only.
Status commRound(Worker& w, Model& m, ModelCopy& c, bool timed) {
  const uint64_t round = ++c.round;
  std::fill(m.in.begin(), m.in.end(), contribution(w, round));
  const auto start = Clock::now();
  for (size_t f = c.ids.size(); f-- > 0;) {
    ZPS_ASSIGN_OR_RETURN(c.handles[f], w.pushPull(c.ids[f], m.in.data() + m.offsets[f], m.out.data() + m.offsets[f]));
  }
  for (Handle h : c.handles) ZPS_RETURN_IF_ERROR(w.wait(h));
  const double seconds = secondsSince(start);
  const uint64_t wrong = countWrong(w, m, round);
  if (timed) {
    c.times->comm.push_back(seconds);
    c.times->wrong += wrong;
  }
  return Status::OK();
}

// The backward pass with a push-pull per gradient as it becomes ready, then the next forward pass,
// each layer waiting for its push-pull first.
Status overlapIteration(Worker& w, Model& m, ModelCopy& c, bool timed) {
  const uint64_t round = ++c.round;
  std::fill(m.in.begin(), m.in.end(), contribution(w, round));
  const auto start = Clock::now();
  double ready = 0;
  for (size_t f = c.ids.size(); f-- > 0;) {
    ready += m.backward_s[f];
    std::this_thread::sleep_until(after(start, ready));
    ZPS_ASSIGN_OR_RETURN(c.handles[f], w.pushPull(c.ids[f], m.in.data() + m.offsets[f], m.out.data() + m.offsets[f]));
  }
  double blocked = 0;
  auto computed = after(start, ready);  // when the previous layer's compute ends
  for (size_t f = 0; f < c.ids.size(); ++f) {
    // A layer whose sum is already here starts when the previous one ends, so a late wake-up from
    // sleeping does not add up over the layers; one that waits starts when its sum came.
    ZPS_ASSIGN_OR_RETURN(bool ready, w.poll(c.handles[f]));
    const auto waiting = Clock::now();
    ZPS_RETURN_IF_ERROR(w.wait(c.handles[f]));
    if (!ready) {
      blocked += secondsSince(waiting);
      computed = std::max(computed, Clock::now());
    }
    computed = after(computed, m.forward_s[f]);
    std::this_thread::sleep_until(computed);
  }
  const double seconds = secondsSince(start);
  const uint64_t wrong = countWrong(w, m, round);  // after the clock stops: checking is not compute
  if (timed) {
    c.times->overlap.push_back(seconds);
    c.times->blocked.push_back(blocked);
    c.times->wrong += wrong;
  }
  return Status::OK();
}

StatusOr<ModelCopy> declareCopy(Worker& w, const std::string& model, const std::vector<ModelTensor>& forward,
                                bool prioritized, ScheduleTimes* times, std::vector<TensorId>* declared) {
  ModelCopy c;
  c.times = times;
  for (size_t f = 0; f < forward.size(); ++f) {
    DeclareOptions options;
    if (prioritized) options.priority = static_cast<int64_t>(f);
    options.unscheduled = !prioritized;  // FIFO, whatever the job's default scheduling
    ZPS_ASSIGN_OR_RETURN(TensorId id, w.declare("bench/" + model + "/" + times->name + "/" + forward[f].name,
                                                forward[f].elements * 4, DType::kFloat32, options));
    c.ids.push_back(id);
    declared->push_back(id);
    times->messages += w.partitions(id).size();
  }
  c.handles.resize(c.ids.size());
  return c;
}

// Worker 0's value, shared with every worker through a push-pull to which only it contributes.
StatusOr<int64_t> fromRankZero(Worker& w, TensorId control, int64_t mine) {
  if (w.rank() != 0) mine = 0;
  int64_t shared = 0;
  ZPS_ASSIGN_OR_RETURN(Handle h, w.pushPull(control, &mine, &shared));
  ZPS_RETURN_IF_ERROR(w.wait(h));
  return shared;
}

}  // namespace

StatusOr<OverlapResult> runOverlap(Worker& w, TensorId control, const OverlapOptions& options,
                                   std::vector<TensorId>* declared) {
  ZPS_ASSIGN_OR_RETURN(std::vector<ModelTensor> backward, modelTensors(options.model));
  std::vector<ModelTensor> forward(backward.rbegin(), backward.rend());
  OverlapResult r;
  r.tensors = forward.size();
  r.schedules.resize(2);
  r.schedules[0].name = "fifo";
  r.schedules[1].name = "priority";
  std::vector<ModelCopy> copies;
  for (size_t s = 0; s < r.schedules.size(); ++s) {
    ZPS_ASSIGN_OR_RETURN(ModelCopy c, declareCopy(w, options.model, forward, s == 1, &r.schedules[s], declared));
    copies.push_back(std::move(c));
  }
  Model m;
  for (const auto& t : forward) {
    m.offsets.push_back(m.total);
    m.elements.push_back(t.elements);
    m.total += t.elements;
  }
  r.bytes = m.total * 4;
  m.in.resize(m.total);
  m.out.resize(m.total);
  // Alternating schedules, so a noisy machine slows both alike.
  for (int i = 0; i < options.warmup_iters + options.iters; ++i)
    for (auto& c : copies) ZPS_RETURN_IF_ERROR(commRound(w, m, c, i >= options.warmup_iters));
  double compute_s = options.compute_ms / 1e3;
  if (options.compute_ms < 0) compute_s = median(r.schedules[0].comm);
  // Every worker simulates worker 0's compute time (in microseconds).
  ZPS_ASSIGN_OR_RETURN(int64_t compute_us, fromRankZero(w, control, static_cast<int64_t>(compute_s * 1e6)));
  r.compute_s = compute_us / 1e6;
  for (size_t f = 0; f < forward.size(); ++f) {
    const double share = static_cast<double>(m.elements[f]) / m.total * r.compute_s;
    m.backward_s.push_back(share * 2 / 3);
    m.forward_s.push_back(share / 3);
  }
  for (int i = 0; i < options.warmup_iters + options.iters; ++i)
    for (auto& c : copies) ZPS_RETURN_IF_ERROR(overlapIteration(w, m, c, i >= options.warmup_iters));
  return r;
}

void printOverlap(const OverlapResult& r, const OverlapOptions& options) {
  std::printf(
      "#\n# overlap: %s, %zu tensors, %.1f MB; simulated compute %.1f ms per iteration (backward 2/3, forward\n",
      options.model.c_str(), r.tensors, r.bytes / 1e6, r.compute_s * 1e3);
  std::printf("# 1/3, per layer by parameters); medians of %d iterations each, the schedules alternating\n",
              options.iters);
  std::printf("# %9s %8s %14s %15s %15s %7s\n", "schedule", "messages", "comm only(ms)", "iteration(ms)",
              "fwd blocked(ms)", "#wrong");
  for (const auto& s : r.schedules)
    std::printf("  %9s %8zu %14.1f %15.1f %15.1f %7llu\n", s.name.c_str(), s.messages, median(s.comm) * 1e3,
                median(s.overlap) * 1e3, median(s.blocked) * 1e3, static_cast<unsigned long long>(s.wrong));
  const double measured = median(r.schedules[0].comm);
  double comm = measured;
  if (options.link_mbit > 0) {
    // A worker's link carries each gradient byte once out and once back, both directions at once.
    comm = r.bytes * 8 / (options.link_mbit * 1e6);
    std::printf("# communication bound: %.1f MB / %.0f Mbit/s = %.1f ms (fifo, communication only: %.1f ms)\n",
                r.bytes / 1e6, options.link_mbit, comm * 1e3, measured * 1e3);
  } else {
    std::printf("# communication: %.1f ms, fifo's communication-only median (no --link_mbit for a bound)\n",
                measured * 1e3);
  }
  const double bound = std::max(r.compute_s, comm);
  const double fifo = median(r.schedules[0].overlap), prio = median(r.schedules[1].overlap);
  std::printf("# iteration / max(compute, communication): fifo %.2f, priority %.2f; priority / fifo %.2f\n",
              fifo / bound, prio / bound, prio / fifo);
  std::printf("goal: priority iteration / max(compute, communication), %s: %.2f (<= 1.10, and below fifo's %.2f) %s\n",
              options.model.c_str(), prio / bound, fifo / bound,
              prio / bound <= 1.10 && prio < fifo ? "met" : "NOT met");
}

}  // namespace zps
