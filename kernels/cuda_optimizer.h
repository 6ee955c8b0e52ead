// CUDA twins of kernels/optimizer.h's update rules, for parameters that live on the GPU (server
// param mode on a CUDA engine, GPU training). Plain C++: the stream travels as an opaque pointer.
// Without CUDA in the build the entry point returns kUnavailable (kernels/cuda_stub.cc).
//
// Same rules, same state layout ([slot][n]) and same Adam bias corrections (computed on the host in
// double, exactly as applyOptimizer does). Every multiply, add, divide and square root is an
// IEEE-rounded single operation (no fused multiply-add), the same operations in the same order as
// the CPU loop, so results match the CPU bit for bit on IEEE hardware.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/optimizer.h"
#include "zps/status.h"

namespace zps::kernels {

// Enqueues applyOptimizer(config, params, state, grad, n, step) on `stream` (a cudaStream_t;
// nullptr is the legacy default stream). All pointers are device memory of the current device;
// state may be null when optimizerStateFloats(config.kind) == 0. Returns without waiting.
Status cudaApplyOptimizer(const OptimizerConfig& config, float* params, float* state, const float* grad, size_t n,
                          uint64_t step, void* stream);

// The same rules for `rows` table rows of `dim` parameters at once (server param mode): params and
// grad are [rows][dim], state is [rows][slot][dim] (each row's state as applyOptimizer lays it out
// for n = dim), and Adam's factors come per row (adamCorrections of that row's step), because rows
// have their own update counts. Device pointers; enqueued on `stream`, returns without waiting.
Status cudaApplyOptimizerRows(const OptimizerConfig& config, float* params, float* state, const float* grad,
                              size_t rows, size_t dim, const float* inv_bc1, const float* inv_bc2, void* stream);

}  // namespace zps::kernels
