// Where `zps train` runs its dense products: --device cpu (OpenBLAS), cuda (cuBLAS) or auto (cuBLAS
// when a usable GPU is present, else OpenBLAS). The default is cpu, not auto: cuBLAS and OpenBLAS
// round differently, and a job whose workers silently picked different devices would lose the
// bit-identical weights that synchronous training promises. Asking for auto or cuda is a choice
// made for the whole job.
#pragma once

#include <string>

#include "zps/status.h"

namespace zps::train {

// Installs the chosen backend for every later train::gemm of this process and returns a line for
// the log. `local_rank` picks the GPU (local rank modulo the visible devices), so the processes of
// one node spread over its GPUs. kInvalidArgument for an unknown name; kUnavailable for cuda
// without a usable GPU (the message says why).
StatusOr<std::string> useTrainDevice(const std::string& device, int local_rank);

}  // namespace zps::train
