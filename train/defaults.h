// The defaults of the training settings that `zps train` and the Python binding share, chosen by
// measurement over seeds 1-5 (docs/training.md has the table, tests/unit/defaults_test.cc
// holds them to it). Pure functions; any thread.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/optimizer.h"

namespace zps::train {

inline constexpr int kDefaultEpochs = 20;
inline constexpr size_t kDefaultBatchSize = 32;  // per worker
// One hidden layer of this size (mlp, ctr); also the default of zps train --hidden (tools/train.cc).
inline constexpr size_t kDefaultHidden = 128;
// The ctr embedding table's optimizer on the servers (zps train --table_optimizer): adam, the best
// tried on synthetic-ctr over seeds 1-5 (docs/training.md).
inline constexpr const char* kDefaultTableOptimizer = "adam";

// The dense optimizer when none is named: sgd for linear regression (its squared loss in the target's
// own units suits plain steps), adam for the classifiers.
kernels::OptimizerKind defaultOptimizer(const std::string& model);
// The dense learning rate when none is given, per optimizer: sgd 0.05, momentum 0.01, adam 0.003.
float defaultLr(kernels::OptimizerKind kind);
// The embedding table's learning rate when none is given, per table optimizer: adam 0.0003, adagrad
// 0.03, sgd 0.1, momentum 0.01 (each the best tried on synthetic-ctr over seeds 1-5).
float defaultTableLr(kernels::OptimizerKind kind);

}  // namespace zps::train
