// Single-process training: the reference loop that `zps train` runs in data-parallel form, and the
// baseline its distributed results are compared against.
//
// The loop, which `zps train` keeps step for step (tools/train.cc):
//   for epoch e in [0, epochs):
//     order = epochOrder(train.rows, seed, e)
//     for step s in [0, rows / batch): the global batch is order[s * batch, (s + 1) * batch); the
//       rows / batch remainder sits out this epoch (the next epoch's order differs)
//       dense: grad = lossAndGrad(...) * (1 / batch); applyOptimizer(optimizer, ..., global step)
//       ctr:   each distinct row of the batch gets reduceRowGrads(...) * (1 / batch) and one step of
//              embedding_optimizer, counted per row
// With W workers each taking its slice (batchSlice) of every global batch and summing gradients
// through the servers, the updates are the same up to float rounding of the sums; with one worker
// they are the same bit for bit.
//
// Runs on the calling thread; owns everything it creates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "train/dataset.h"
#include "train/metrics.h"

namespace zps::train {

struct TrainOptions {
  std::string model = "mlp";  // linear | mlp | ctr
  std::vector<size_t> hidden;
  size_t embedding_dim = 8;
  int epochs = 10;
  size_t batch_size = 32;
  kernels::OptimizerConfig optimizer;            // dense parameters
  kernels::OptimizerConfig embedding_optimizer;  // ctr embedding rows (what the servers would run)
  float embedding_init_scale = 0.01f;
  uint64_t seed = 1;  // initial weights and epoch order
};

struct EpochStats {
  int epoch = 0;          // 1-based
  double train_loss = 0;  // mean loss per sample over the epoch, at the weights each batch saw
  size_t samples = 0;     // samples trained on: whole batches only
  double seconds = 0;
  double samplesPerSecond() const { return seconds > 0 ? samples / seconds : 0; }
};

struct TrainResult {
  std::string model;  // Model::describe()
  std::vector<EpochStats> epochs;
  Evaluation test;
  std::vector<float> params;  // the final dense parameters
  size_t embedding_rows = 0;  // rows the local table created (ctr)
};

// Trains on split.train and evaluates on split.test. Errors: a bad model name or model/data
// mismatch (makeModel), a bad optimizer config, zero epochs, a batch size of 0 or above the
// training rows.
StatusOr<TrainResult> trainLocal(const Split& split, const TrainOptions& options,
                                 const std::function<void(const EpochStats&)>& on_epoch = nullptr);

}  // namespace zps::train
