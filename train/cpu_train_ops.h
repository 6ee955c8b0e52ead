// The CPU backend of kernels/train_ops.h: host memory, OpenBLAS products (blas.h) and plain loops
// in a fixed order, so results are deterministic. The models' default backend; it never fails.
#pragma once

#include "kernels/train_ops.h"

namespace zps::train {

// The process's CPU backend. It holds no state besides its (never set) error, so all threads share it.
kernels::TrainOps& cpuTrainOps();

}  // namespace zps::train
