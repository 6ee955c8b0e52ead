#include "train/local_trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "train/embedding.h"
#include "train/model.h"

namespace zps::train {
namespace {

// Evaluation runs in chunks so a large test split never needs all its activations at once.
constexpr size_t kEvalChunk = 4096;

Evaluation evaluate(Model& model, const float* params, const Dataset& data, LocalEmbeddingTable* table) {
  const size_t per_row = model.outputsPerRow();
  const size_t dim = model.embeddingDim();
  std::vector<float> outputs(data.rows * per_row);
  std::vector<size_t> rows;
  std::vector<float> unique_rows, emb;
  BatchIds ids;
  double loss = 0;
  for (size_t begin = 0; begin < data.rows; begin += kEvalChunk) {
    const size_t n = std::min(kEvalChunk, data.rows - begin);
    rows.resize(n);
    for (size_t i = 0; i < n; ++i) rows[i] = begin + i;
    const float* emb_ptr = nullptr;
    if (dim > 0) {
      collectBatchIds(data, rows.data(), n, &ids);
      unique_rows.resize(ids.unique.size() * dim);
      table->lookup(ids.unique.data(), ids.unique.size(), unique_rows.data(), /*create=*/false);
      emb.resize(ids.slot_of.size() * dim);
      expandRows(ids, unique_rows.data(), dim, emb.data());
      emb_ptr = emb.data();
    }
    double chunk_loss = 0;
    model.predict(params, data, rows.data(), n, emb_ptr, outputs.data() + begin * per_row, &chunk_loss);
    loss += chunk_loss;
  }
  return evaluateOutputs(data, outputs.data(), per_row, data.rows ? loss / static_cast<double>(data.rows) : 0.0);
}

}  // namespace

StatusOr<TrainResult> trainLocal(const Split& split, const TrainOptions& options,
                                 const std::function<void(const EpochStats&)>& on_epoch) {
  if (options.epochs <= 0) return InvalidArgument("epochs must be positive");
  if (options.batch_size == 0) return InvalidArgument("batch size must be positive");
  ZPS_RETURN_IF_ERROR(kernels::validateOptimizerConfig(options.optimizer));
  ZPS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                       makeModel(options.model, split.train, options.hidden, options.embedding_dim));
  if (split.test.rows > 0) ZPS_RETURN_IF_ERROR(model->checkData(split.test));
  const size_t dim = model->embeddingDim();
  std::unique_ptr<LocalEmbeddingTable> table;
  if (dim > 0) {
    ZPS_RETURN_IF_ERROR(kernels::validateOptimizerConfig(options.embedding_optimizer));
    table = std::make_unique<LocalEmbeddingTable>(dim, options.embedding_optimizer, options.embedding_init_scale,
                                                  options.seed);
  }

  const Dataset& train = split.train;
  // Whole batches only, as `zps train` does: every worker then takes equal slices of every step.
  const size_t steps_per_epoch = train.rows / options.batch_size;
  if (steps_per_epoch == 0) {
    return InvalidArgument("the training split has " + std::to_string(train.rows) + " rows, fewer than one batch of " +
                           std::to_string(options.batch_size));
  }
  TrainResult result;
  result.model = model->describe();
  const size_t np = model->numDenseParams();
  std::vector<float> params(np), grad(np);
  std::vector<float> state(kernels::optimizerStateFloats(options.optimizer.kind) * np);
  model->initDense(params.data(), options.seed);
  kernels::initOptimizerState(options.optimizer, state.data(), np);

  BatchIds ids;
  std::vector<float> unique_rows, emb, grad_emb, row_grads;
  uint64_t step = 0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<size_t> order = epochOrder(train.rows, options.seed, epoch);
    double loss_sum = 0;
    for (size_t step_in_epoch = 0; step_in_epoch < steps_per_epoch; ++step_in_epoch) {
      const size_t n = options.batch_size;
      const size_t* rows = order.data() + step_in_epoch * n;
      const float* emb_ptr = nullptr;
      if (dim > 0) {
        collectBatchIds(train, rows, n, &ids);
        unique_rows.resize(ids.unique.size() * dim);
        table->lookup(ids.unique.data(), ids.unique.size(), unique_rows.data());
        emb.resize(ids.slot_of.size() * dim);
        expandRows(ids, unique_rows.data(), dim, emb.data());
        grad_emb.resize(emb.size());
        emb_ptr = emb.data();
      }
      loss_sum +=
          model->lossAndGrad(params.data(), train, rows, n, emb_ptr, grad.data(), dim > 0 ? grad_emb.data() : nullptr);
      const float scale = 1.0f / static_cast<float>(n);
      for (float& g : grad) g *= scale;
      kernels::applyOptimizer(options.optimizer, params.data(), state.data(), grad.data(), np, ++step);
      if (dim > 0) {
        row_grads.resize(ids.unique.size() * dim);
        reduceRowGrads(ids, grad_emb.data(), dim, row_grads.data());
        for (float& g : row_grads) g *= scale;
        table->apply(ids.unique.data(), ids.unique.size(), row_grads.data());
      }
    }
    EpochStats stats;
    stats.epoch = epoch + 1;
    stats.samples = steps_per_epoch * options.batch_size;
    stats.train_loss = loss_sum / static_cast<double>(stats.samples);
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.epochs.push_back(stats);
    if (on_epoch) on_epoch(stats);
  }
  result.test = evaluate(*model, params.data(), split.test, table.get());
  result.params = std::move(params);
  result.embedding_rows = table ? table->size() : 0;
  return result;
}

}  // namespace zps::train
