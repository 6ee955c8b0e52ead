// Embedding rows for the CTR model, on the worker side: which rows a batch touches, how pulled rows
// are laid out for Model::lossAndGrad, how its per-slot gradients fold into one gradient per row,
// and a local table that stands in for the servers in single-process training.
//
// The distributed path is: collectBatchIds -> pull ids.unique from the servers -> expandRows ->
// lossAndGrad -> reduceRowGrads -> push (ids.unique, row grads / global batch). A batch pulls and
// pushes each distinct row once, so the bytes moved grow with the rows touched, not the table size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kernels/optimizer.h"
#include "train/dataset.h"

namespace zps::train {

// The distinct embedding ids of a batch and where each (row, field) slot finds its id. A plain
// value.
struct BatchIds {
  std::vector<uint64_t> unique;   // ascending: the same order on every worker for the same batch
  std::vector<uint32_t> slot_of;  // n x fields: index into `unique` of row i's field f
};

// Fills `ids` for data rows rows[0..n).
void collectBatchIds(const Dataset& data, const size_t* rows, size_t n, BatchIds* ids);

// Lays out rows for Model::lossAndGrad: emb (slot_of.size() x dim) from unique_rows
// (unique.size() x dim, in the order of ids.unique).
void expandRows(const BatchIds& ids, const float* unique_rows, size_t dim, float* emb);

// Sums the per-slot gradients grad_emb (slot_of.size() x dim) into one gradient per distinct id
// (unique.size() x dim), slot by slot in batch order, so every worker sums in the same order.
void reduceRowGrads(const BatchIds& ids, const float* grad_emb, size_t dim, float* unique_grads);

// An embedding table in local memory with the servers' semantics: rows are created on first touch
// by kernels::initEmbeddingRow and updated by a kernels optimizer, with one update count per row
// (Adam's bias correction counts that row's updates). Used by single-process training and tests;
// owned by one thread.
class LocalEmbeddingTable {
 public:
  LocalEmbeddingTable(size_t dim, const kernels::OptimizerConfig& optimizer, float init_scale, uint64_t seed);

  size_t dim() const { return dim_; }
  size_t size() const { return steps_.size(); }

  // Copies the rows of ids[0..count) into out (count x dim). A missing row is created when `create`
  // is set; otherwise its initial value is returned without storing it (evaluation).
  void lookup(const uint64_t* ids, size_t count, float* out, bool create = true);
  // Applies one optimizer step to each row of ids[0..count) with grads (count x dim). Ids must be
  // distinct within a call (reduceRowGrads makes them so).
  void apply(const uint64_t* ids, size_t count, const float* grads);

 private:
  size_t rowOf(uint64_t id);

  size_t dim_;
  kernels::OptimizerConfig optimizer_;
  size_t state_floats_;
  float init_scale_;
  uint64_t seed_;
  std::unordered_map<uint64_t, size_t> index_;
  std::vector<float> values_;  // size() x dim
  std::vector<float> state_;   // size() x (state_floats_ x dim), per row [slot][dim]
  std::vector<uint64_t> steps_;
};

}  // namespace zps::train
