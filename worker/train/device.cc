#include "worker/train/device.h"

#include "kernels/cuda_reducer.h"
#include "worker/train/cpu_train_ops.h"

namespace zps::train {

StatusOr<TrainDevice> openTrainDevice(const std::string& device, int local_rank) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return InvalidArgument("--device='" + device + "' is not a device; use cpu, cuda or auto");
  }
  TrainDevice d;
  d.ops = &cpuTrainOps();
  d.description = d.ops->describe();
  if (device == "cpu") return d;
  std::string why;
  if (!kernels::cudaDeviceAvailable(&why)) {
    if (device == "cuda")
      return Unavailable("--device=cuda but " + why + "; use --device=cpu or auto");
    d.description += ": --device=auto found no GPU: " + why;
    return d;
  }
  const int count = kernels::cudaDeviceCount();
  ZPS_ASSIGN_OR_RETURN(d.owned, kernels::makeCudaTrainOps(count > 0 ? local_rank % count : 0));
  d.ops = d.owned.get();
  d.description = d.ops->describe();
  return d;
}

}  // namespace zps::train
