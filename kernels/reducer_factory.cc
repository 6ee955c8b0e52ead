#include "kernels/reducer_factory.h"

#include "kernels/cuda_reducer.h"

namespace zps::kernels {

StatusOr<ReducerChoice> chooseReducer(const std::string& engine) {
  ReducerChoice choice;
  if (engine == "cpu") return choice;
  if (engine != "auto" && engine != "cuda") {
    return InvalidArgument("ZPS_SERVER_ENGINE='" + engine + "' is not an engine; set it to auto, cpu or cuda");
  }
  std::string why;
  if (cudaDeviceAvailable(&why)) {
    choice.kind = ReducerKind::kCuda;
    if (engine == "auto") choice.note = "ZPS_SERVER_ENGINE=auto: using the CUDA engine";
    return choice;
  }
  if (engine == "cuda") {
    return Unavailable("ZPS_SERVER_ENGINE=cuda but " + why +
                       "; run on a machine with a GPU or set ZPS_SERVER_ENGINE=auto or cpu");
  }
  choice.note = "ZPS_SERVER_ENGINE=auto: " + why + "; using the CPU engine";
  return choice;
}

StatusOr<std::unique_ptr<Reducer>> makeReducer(ReducerKind kind, int engine_index) {
  if (kind == ReducerKind::kCpu) return makeCpuReducer();
  const int devices = cudaDeviceCount();
  return makeCudaReducer(devices > 0 ? engine_index % devices : 0);
}

}  // namespace zps::kernels
