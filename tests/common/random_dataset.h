// Random data of a given shape for the model tests (tests/unit models, tests/cuda train ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>

#include "train/dataset.h"

namespace zps::testing {

// Normal features, labels for the task (classes 0: regression targets), ids from a small vocabulary
// (so a batch repeats some ids, as real batches do).
inline train::Dataset randomData(size_t rows, size_t numeric, size_t fields, int classes, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal;
  train::Dataset d;
  d.name = "random";
  d.rows = rows;
  d.num_numeric = numeric;
  d.num_categorical = fields;
  d.num_classes = classes;
  for (size_t i = 0; i < rows * numeric; ++i) d.numeric.push_back(normal(gen));
  for (size_t i = 0; i < rows * fields; ++i) d.categorical.push_back(train::categoricalId(i % fields, gen() % 3));
  for (size_t r = 0; r < rows; ++r)
    d.labels.push_back(classes == 0 ? 2.0f * normal(gen) : static_cast<float>(gen() % classes));
  return d;
}

}  // namespace zps::testing
