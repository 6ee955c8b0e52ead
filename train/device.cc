#include "train/device.h"

#include "kernels/cuda_reducer.h"
#include "train/cpu_train_ops.h"

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
  const int gpu = kernels::gpuOfLocalRank(local_rank);
  // Probed on the GPU this rank will use: probing device 0 would give every local rank a context there.
  if (!kernels::cudaDeviceAvailable(&why, gpu)) {
    if (device == "cuda") return Unavailable("--device=cuda but " + why + "; use --device=cpu or auto");
    d.description += ": --device=auto found no GPU: " + why;
    return d;
  }
  ZPS_ASSIGN_OR_RETURN(d.owned, kernels::makeCudaTrainOps(gpu));
  d.ops = d.owned.get();
  d.description = d.ops->describe();
  return d;
}

}  // namespace zps::train
