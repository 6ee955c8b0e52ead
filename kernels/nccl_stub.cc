// The NCCL entry points of a build without CUDA or without NCCL: each reports why, so the worker
// can refuse device tensors with a clear message instead of failing to link.
#include <string>

#include "kernels/local_collectives.h"

namespace zps::kernels {
namespace {

#ifdef ZPS_HAVE_CUDA
constexpr const char* kNoNccl =
    "this zps build has CUDA but no NCCL (nccl.h and libnccl were not found at configure time)";
#else
constexpr const char* kNoNccl =
    "this zps build has no CUDA and so no NCCL (configure with nvcc present or -DZPS_WITH_CUDA=ON)";
#endif

}  // namespace

StatusOr<std::string> ncclNewUniqueId() { return Unavailable(kNoNccl); }

StatusOr<std::unique_ptr<DeviceLocalReducer>> makeNcclLocalReducer(const std::string& /*unique_id*/, int /*rank*/,
                                                                   int /*size*/, int /*device*/,
                                                                   std::chrono::milliseconds /*timeout*/,
                                                                   KeepWaiting /*keep_waiting*/) {
  return Unavailable(kNoNccl);
}

}  // namespace zps::kernels
