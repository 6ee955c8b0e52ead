// `zps bench --model M --compute_ms X`: training-shaped iterations with simulated compute, to show how
// well communication overlaps it, FIFO against priority scheduling in one run.
//
// One iteration: the backward pass (2/3 of the compute), where the gradients become ready layer by
// layer, last layer first, each after compute time proportional to its parameters, and each is
// push-pulled as soon as it is ready; then the next forward pass (1/3 of the compute), where layer
// i first waits for its push-pull and then computes for a time proportional to its parameters. The
// iteration time runs from the start of the backward pass to the end of the forward pass, so every
// push-pull of an iteration ends inside it. Compute is sleeping (the CPUs stay free for the
// communication): the time each layer's compute ends is fixed from the start of its pass, so short
// layers do not add up sleep overheads.
//
// Two copies of the model's tensors are declared: "fifo" ones unscheduled (DeclareOptions::unscheduled:
// their requests leave at once, in the order they are issued, whatever the job's scheduling), and "priority" ones
// with priority = forward layer index (lower first), which the worker schedules with credits
// (worker/scheduling/push_scheduler.h). Iterations alternate between them so both see the same machine.
//
// Used by bench.cc on the worker's program thread.
#pragma once

#include <string>
#include <vector>

#include "zps/worker.h"

namespace zps {

struct OverlapOptions {
  std::string model;
  double compute_ms = 0;  // per iteration; negative: equal to the measured communication-only time
  double link_mbit = 0;   // the link rate, for the bound (0: unknown)
  int warmup_iters = 1;
  int iters = 5;
};

// One schedule's measurements, in seconds per iteration.
struct ScheduleTimes {
  std::string name;             // "fifo" or "priority"
  std::vector<double> comm;     // push-pull of every tensor in backward order, no compute
  std::vector<double> overlap;  // iterations with compute
  std::vector<double> blocked;  // time the forward passes waited for push-pulls
  uint64_t wrong = 0;           // values that differ from the exact sum
  size_t messages = 0;          // requests per push-pull round
};

struct OverlapResult {
  size_t bytes = 0;      // the model's gradient bytes
  size_t tensors = 0;    // its tensor count
  double compute_s = 0;  // the compute per iteration that was simulated
  std::vector<ScheduleTimes> schedules;
};

// Runs the comparison; every worker runs the same iterations. `control` is a 1-element int64 tensor
// (worker 0 shares the measured compute time through it).
StatusOr<OverlapResult> runOverlap(Worker& w, TensorId control, const OverlapOptions& options,
                                   std::vector<TensorId>* declared);

// The overlap table and the goal line (worker 0 prints it).
void printOverlap(const OverlapResult& r, const OverlapOptions& options);

}  // namespace zps
