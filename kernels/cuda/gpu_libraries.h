// cuBLAS and NCCL, loaded with dlopen on first use instead of linked. Linking them made every zps
// process, the scheduler and CPU-only servers included, relocate their data pages at start: 220 MiB
// of resident memory before any tensor (a CUDA build's `zps version` peaked at 232 MiB against
// 15 MiB without CUDA). Now only a process that multiplies on the GPU or joins an NCCL communicator
// pays for them. Private to kernels/cuda: it includes the libraries' headers.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>

#include "zps/status.h"

#ifdef ZPS_HAVE_NCCL
#include <nccl.h>
#endif

namespace zps::kernels::cuda {

// Each X(name) is one library function. cublas_v2.h maps some names to their _v2 symbols with macros
// (cublasCreate -> cublasCreate_v2); the member and the looked-up symbol follow the same expansion.
#define ZPS_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate)               \
  X(cublasDestroy)              \
  X(cublasGetStatusName)        \
  X(cublasGetStatusString)      \
  X(cublasSetMathMode)          \
  X(cublasSetStream)            \
  X(cublasSgemm)

#define ZPS_GPU_LIBRARY_MEMBER(name) decltype(&::name) name = nullptr;

struct CublasLibrary {
  ZPS_CUBLAS_FUNCTIONS(ZPS_GPU_LIBRARY_MEMBER)
};

// The process's cuBLAS (libcublas.so.<major of the headers>), loaded once; the error names the
// library and what dlopen said, so `--device cuda` on a machine without cuBLAS says what is missing.
StatusOr<const CublasLibrary*> cublasLibrary();

// The few driver API calls that answer "does this process have a CUDA context?" without creating
// one, which no runtime API call can promise (isDevicePointer, cuda_util.cc). libcuda.so.1 is the
// driver the CUDA runtime itself loads, so this maps nothing new.
#define ZPS_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuCtxGetCurrent)                 \
  X(cuDeviceGet)                     \
  X(cuDevicePrimaryCtxGetState)

struct DriverLibrary {
  ZPS_CUDA_DRIVER_FUNCTIONS(ZPS_GPU_LIBRARY_MEMBER)
};

StatusOr<const DriverLibrary*> driverLibrary();

#ifdef ZPS_HAVE_NCCL
#define ZPS_NCCL_FUNCTIONS(X) \
  X(ncclAllGather)            \
  X(ncclBroadcast)            \
  X(ncclCommAbort)            \
  X(ncclCommGetAsyncError)    \
  X(ncclCommInitRankConfig)   \
  X(ncclGetErrorString)       \
  X(ncclGetLastError)         \
  X(ncclGetUniqueId)          \
  X(ncclGetVersion)           \
  X(ncclGroupEnd)             \
  X(ncclGroupStart)           \
  X(ncclReduce)               \
  X(ncclReduceScatter)

struct NcclLibrary {
  ZPS_NCCL_FUNCTIONS(ZPS_GPU_LIBRARY_MEMBER)
};

// The process's NCCL (libnccl.so.<major of the headers>), loaded once.
StatusOr<const NcclLibrary*> ncclLibrary();
#endif

}  // namespace zps::kernels::cuda
