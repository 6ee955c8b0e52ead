// Where `zps train` runs its dense models: --device cpu (host memory, OpenBLAS), cuda (one GPU:
// parameters, activations and gradients in device memory, cuBLAS products and CUDA kernels) or auto
// (cuda when a usable GPU is present, else cpu). The default is cpu, not auto: cuBLAS and OpenBLAS
// round differently, and a job whose workers silently picked different devices would lose the
// bit-identical weights that synchronous training promises. Asking for auto or cuda is a choice
// made for the whole job.
#pragma once

#include <memory>
#include <string>

#include "kernels/train_ops.h"
#include "zps/status.h"

namespace zps::train {

struct TrainDevice {
  kernels::TrainOps* ops = nullptr;          // the backend for the models and the trainer
  std::unique_ptr<kernels::TrainOps> owned;  // ops, unless it is the shared CPU backend
  std::string description;                   // for the log: "cuda (cuBLAS on GPU 0)"
};

// The chosen backend. `local_rank` picks the GPU (local rank modulo the visible devices), so the
// processes of one node spread over its GPUs. kInvalidArgument for an unknown name; kUnavailable for
// cuda without a usable GPU or cuBLAS (the message says why).
StatusOr<TrainDevice> openTrainDevice(const std::string& device, int local_rank);

}  // namespace zps::train
