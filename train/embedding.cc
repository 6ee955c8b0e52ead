#include "train/embedding.h"

#include <algorithm>
#include <cstring>

namespace zps::train {

void collectBatchIds(const Dataset& data, const size_t* rows, size_t n, BatchIds* ids) {
  const size_t fields = data.num_categorical;
  ids->unique.clear();
  ids->unique.reserve(n * fields);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* r = data.categoricalRow(rows[i]);
    ids->unique.insert(ids->unique.end(), r, r + fields);
  }
  std::sort(ids->unique.begin(), ids->unique.end());
  ids->unique.erase(std::unique(ids->unique.begin(), ids->unique.end()), ids->unique.end());
  ids->slot_of.resize(n * fields);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* r = data.categoricalRow(rows[i]);
    for (size_t f = 0; f < fields; ++f) {
      const auto it = std::lower_bound(ids->unique.begin(), ids->unique.end(), r[f]);
      ids->slot_of[i * fields + f] = static_cast<uint32_t>(it - ids->unique.begin());
    }
  }
}

void expandRows(const BatchIds& ids, const float* unique_rows, size_t dim, float* emb) {
  for (size_t s = 0; s < ids.slot_of.size(); ++s) {
    std::memcpy(emb + s * dim, unique_rows + size_t{ids.slot_of[s]} * dim, dim * sizeof(float));
  }
}

void reduceRowGrads(const BatchIds& ids, const float* grad_emb, size_t dim, float* unique_grads) {
  std::fill(unique_grads, unique_grads + ids.unique.size() * dim, 0.0f);
  for (size_t s = 0; s < ids.slot_of.size(); ++s) {
    float* dst = unique_grads + size_t{ids.slot_of[s]} * dim;
    const float* src = grad_emb + s * dim;
    for (size_t j = 0; j < dim; ++j) dst[j] += src[j];
  }
}

LocalEmbeddingTable::LocalEmbeddingTable(size_t dim, const kernels::OptimizerConfig& optimizer, float init_scale,
                                         uint64_t seed)
    : dim_(dim),
      optimizer_(optimizer),
      state_floats_(kernels::optimizerStateFloats(optimizer.kind)),
      init_scale_(init_scale),
      seed_(seed) {}

size_t LocalEmbeddingTable::rowOf(uint64_t id) {
  const auto [it, inserted] = index_.try_emplace(id, steps_.size());
  if (inserted) {
    values_.resize(values_.size() + dim_);
    kernels::initEmbeddingRow(id, seed_, init_scale_, values_.data() + it->second * dim_, dim_);
    state_.resize(state_.size() + state_floats_ * dim_);
    kernels::initOptimizerState(optimizer_, state_.data() + it->second * state_floats_ * dim_, dim_);
    steps_.push_back(0);
  }
  return it->second;
}

void LocalEmbeddingTable::lookup(const uint64_t* ids, size_t count, float* out, bool create) {
  for (size_t i = 0; i < count; ++i) {
    float* dst = out + i * dim_;
    if (create) {
      // rowOf may grow values_, so it must run before values_.data() is read.
      const size_t row = rowOf(ids[i]);
      std::memcpy(dst, values_.data() + row * dim_, dim_ * sizeof(float));
      continue;
    }
    const auto it = index_.find(ids[i]);
    if (it != index_.end()) {
      std::memcpy(dst, values_.data() + it->second * dim_, dim_ * sizeof(float));
    } else {
      kernels::initEmbeddingRow(ids[i], seed_, init_scale_, dst, dim_);
    }
  }
}

void LocalEmbeddingTable::apply(const uint64_t* ids, size_t count, const float* grads) {
  for (size_t i = 0; i < count; ++i) {
    const size_t row = rowOf(ids[i]);
    kernels::applyOptimizer(optimizer_, values_.data() + row * dim_, state_.data() + row * state_floats_ * dim_,
                            grads + i * dim_, dim_, ++steps_[row]);
  }
}

}  // namespace zps::train
