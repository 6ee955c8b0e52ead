#include "train/defaults.h"

namespace zps::train {

kernels::OptimizerKind defaultOptimizer(const std::string& model) {
  return model == "linear" ? kernels::OptimizerKind::kSgd : kernels::OptimizerKind::kAdam;
}

float defaultLr(kernels::OptimizerKind kind) {
  switch (kind) {
    case kernels::OptimizerKind::kSgd: return 0.05f;
    case kernels::OptimizerKind::kMomentum: return 0.01f;
    case kernels::OptimizerKind::kAdam: return 0.003f;
    case kernels::OptimizerKind::kAdagrad: return 0.1f;
  }
  return 0.01f;
}

float defaultTableLr(kernels::OptimizerKind kind) {
  switch (kind) {
    case kernels::OptimizerKind::kSgd: return 0.1f;
    case kernels::OptimizerKind::kMomentum: return 0.01f;
    case kernels::OptimizerKind::kAdam: return 0.0003f;
    case kernels::OptimizerKind::kAdagrad: return 0.03f;
  }
  return 0.0003f;
}

}  // namespace zps::train
