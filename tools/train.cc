// `zps train`: the built-in training program. Its flags become a train::TrainingSetup (model, data,
// settings), checked before the worker joins the job; train/distributed_trainer.h runs it.
#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "kernels/optimizer.h"
#include "ps/common/config.h"
#include "tools/command_line.h"
#include "tools/programs.h"
#include "tools/worker_program.h"
#include "train/dataset.h"
#include "train/defaults.h"
#include "train/device.h"
#include "train/distributed_trainer.h"
#include "train/model.h"
#include "train/split.h"

ZPS_FLAG(train, std::string, model, "mlp", "linear (regression), logreg (multinomial logistic regression), mlp or ctr");
ZPS_FLAG(train, std::string, data, "digits",
         "digits, breast_cancer, diabetes, synthetic-regression, synthetic-ctr, csv:PATH, "
         "libsvm:PATH or criteo:PATH");
ZPS_FLAG(train, std::string, data_dir, "", "folder of the named datasets (default $ZPS_DATA_DIR, else ./data)");
ZPS_FLAG(train, int32_t, label_column, -1, "csv label column (negative counts from the end)");
ZPS_FLAG(train, double, test_fraction, 0.2, "share of rows held out for the test metric");
ZPS_FLAG(train, std::string, split, "auto",
         "how test rows are chosen: stratified (by class), random, or auto (stratified for classification)");
ZPS_FLAG(train, std::string, libsvm_base, "auto",
         "libsvm feature indices start at 0, 1, or auto (0 when an index 0 appears)");
ZPS_FLAG(train, uint64_t, synthetic_rows, 0, "rows of a synthetic dataset (0 = its default)");
ZPS_FLAG(train, int32_t, epochs, zps::train::kDefaultEpochs, "passes over the training data");
ZPS_FLAG(train, int32_t, batch_size, static_cast<int>(zps::train::kDefaultBatchSize),
         "samples per worker per step (the global batch is workers x this)");
ZPS_FLAG(train, double, lr, 0,
         "learning rate of the dense optimizer (0: its default: sgd 0.05, momentum 0.01, adam 0.003)");
ZPS_FLAG(train, std::string, optimizer, "auto",
         "dense optimizer: sgd, momentum, adam, or auto (sgd for linear, adam otherwise)");
ZPS_FLAG(train, uint64_t, seed, 1, "seed of the data split, epoch order and initial weights");
ZPS_FLAG(train, std::string, hidden, std::to_string(zps::train::kDefaultHidden),
         "hidden layer sizes of mlp/ctr, e.g. 128,64");
ZPS_FLAG(train, int32_t, embedding_dim, 8, "ctr embedding row size");
ZPS_FLAG(train, std::string, table_optimizer, zps::train::kDefaultTableOptimizer,
         "ctr embedding optimizer on the servers: sgd, momentum, adagrad or adam");
ZPS_FLAG(train, double, table_lr, 0, "learning rate of the embedding optimizer (0: its default, see docs/training.md)");
ZPS_FLAG(train, std::string, device, "cpu",
         "where the dense model lives and runs: cpu (OpenBLAS), cuda (GPU memory, cuBLAS) or auto");
ZPS_FLAG(train, std::string, weights_out, "", "write the final dense weights (raw float32) to this file");

namespace zps {
namespace {

StatusOr<std::vector<size_t>> parseHidden(const std::string& text) {
  std::vector<size_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto n = parseInteger("--hidden", item, 1, 1 << 16, "layer sizes like 128,64");
    if (!n.ok()) return n.status();
    out.push_back(static_cast<size_t>(*n));
  }
  return out;
}

// The setup the flags describe. Errors name the flag to change.
StatusOr<train::TrainingSetup> prepare(kernels::TrainOps* ops) {
  train::TrainingSetup p;
  p.ops = ops;
  p.model_name = FLAGS_model;
  p.data_name = FLAGS_data;
  p.epochs = FLAGS_epochs;
  p.batch_size = static_cast<size_t>(std::max(FLAGS_batch_size, 0));
  p.seed = FLAGS_seed;
  p.table_optimizer = FLAGS_table_optimizer;
  p.weights_out = FLAGS_weights_out;
  if (FLAGS_epochs < 1) return InvalidArgument("--epochs must be at least 1");
  if (FLAGS_batch_size < 1) return InvalidArgument("--batch_size must be at least 1");
  if (!(FLAGS_lr >= 0)) return InvalidArgument("--lr must be positive (or 0 for the optimizer's default)");
  if (!(FLAGS_table_lr >= 0)) return InvalidArgument("--table_lr must be positive (or 0 for the optimizer's default)");
  if (FLAGS_optimizer == "auto") {
    p.dense_opt.kind = train::defaultOptimizer(FLAGS_model);
  } else {
    ZPS_ASSIGN_OR_RETURN(p.dense_opt.kind, kernels::optimizerFromName(FLAGS_optimizer));
  }
  if (p.dense_opt.kind == kernels::OptimizerKind::kAdagrad)
    return InvalidArgument("--optimizer for dense weights is sgd, momentum, adam or auto");
  p.dense_opt.lr = FLAGS_lr > 0 ? static_cast<float>(FLAGS_lr) : train::defaultLr(p.dense_opt.kind);
  ZPS_ASSIGN_OR_RETURN(kernels::OptimizerKind table_kind, kernels::optimizerFromName(FLAGS_table_optimizer));
  p.table_lr = FLAGS_table_lr > 0 ? static_cast<float>(FLAGS_table_lr) : train::defaultTableLr(table_kind);
  ZPS_ASSIGN_OR_RETURN(std::vector<size_t> hidden, parseHidden(FLAGS_hidden));
  train::LoadOptions lo;
  lo.data_dir = FLAGS_data_dir;
  if (lo.data_dir.empty()) {
    const char* env = std::getenv("ZPS_DATA_DIR");
    lo.data_dir = env != nullptr && env[0] != '\0' ? env : "data";
  }
  lo.label_column = FLAGS_label_column;
  lo.test_fraction = FLAGS_test_fraction;
  ZPS_ASSIGN_OR_RETURN(lo.split, train::splitKindFromName(FLAGS_split));
  lo.seed = FLAGS_seed;
  lo.synthetic_rows = FLAGS_synthetic_rows;
  if (FLAGS_libsvm_base == "0" || FLAGS_libsvm_base == "1") {
    lo.libsvm_base = FLAGS_libsvm_base == "0" ? 0 : 1;
  } else if (FLAGS_libsvm_base != "auto") {
    return InvalidArgument("--libsvm_base is 0, 1 or auto, not '" + FLAGS_libsvm_base + "'");
  }
  StatusOr<train::Split> split = train::loadDataset(FLAGS_data, lo);
  // A missing data file is the user's to fix, like every other refusal of the data: exit code 2.
  if (!split.ok() && split.status().code() == StatusCode::kNotFound) return InvalidArgument(split.status().message());
  ZPS_ASSIGN_OR_RETURN(p.split, std::move(split));
  ZPS_ASSIGN_OR_RETURN(
      p.model, train::makeModel(FLAGS_model, p.split.train, hidden, static_cast<size_t>(FLAGS_embedding_dim), ops));
  ZPS_RETURN_IF_ERROR(p.model->checkData(p.split.train));
  ZPS_RETURN_IF_ERROR(p.model->checkData(p.split.test));
  return p;
}

}  // namespace

int trainMain() {
  auto config = loadConfig(processEnv(), Role::kWorker);
  if (!config.ok()) {
    std::cerr << "zps train: " << config.status().message() << std::endl;
    return 2;
  }
  auto device = train::openTrainDevice(FLAGS_device, config->local_rank);
  if (!device.ok()) {
    std::cerr << "zps train: " << device.status().message() << std::endl;
    return 2;
  }
  LOG(INFO) << "zps train: dense model on " << device->description;
  auto prepared = prepare(device->ops);
  return runWorkerProgram("train", [&](Worker& w) -> Status {
    if (!prepared.ok()) return prepared.status();
    return train::runDistributedTraining(w, *prepared, *config);
  });
}

}  // namespace zps
