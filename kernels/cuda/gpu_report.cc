// `zps version --gpu` in a CUDA build (kernels/gpu_report.h).
#include "kernels/gpu_report.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <sstream>

#include "kernels/cuda/gpu_libraries.h"
#include "kernels/cuda_reducer.h"

namespace zps::kernels {
namespace {

// 13000 -> "13.0"
std::string cudaVersionText(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The file a resolved function came from: which of several installed copies the loader picked.
std::string fileOf(const void* function) {
  Dl_info info{};
  if (function != nullptr && dladdr(function, &info) != 0 && info.dli_fname != nullptr) return info.dli_fname;
  return "?";
}

}  // namespace

GpuReport gpuReport() {
  GpuReport report;
  std::ostringstream out;
  out << "build: CUDA runtime " << cudaVersionText(CUDART_VERSION) << " (static), GPU code for "
      << ZPS_CUDA_ARCHITECTURES
#ifdef ZPS_HAVE_NCCL
      << ", NCCL " << NCCL_MAJOR << "." << NCCL_MINOR << "." << NCCL_PATCH << " headers";
#else
      << ", no NCCL (the NCCL local reducer is left out)";
#endif
  out << "\n";

  int driver = 0;
  cudaError_t e = cudaDriverGetVersion(&driver);
  if (e != cudaSuccess || driver == 0) {
    out << "driver: none (" << (e != cudaSuccess ? cudaGetErrorString(e) : "no NVIDIA driver is loaded") << ")\n";
  } else {
    out << "driver: supports CUDA " << cudaVersionText(driver)
        << (driver < CUDART_VERSION ? ", older than this build's runtime: update the driver" : "") << "\n";
  }

  const int count = cudaDeviceCount();
  out << "devices: " << count << "\n";
  bool any_device = false;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      out << "  " << d << ": properties unreadable\n";
      continue;
    }
    char memory[32];
    std::snprintf(memory, sizeof(memory), "%.1f GiB", static_cast<double>(prop.totalGlobalMem) / (1ull << 30));
    std::string why;
    const bool runs = cudaDeviceAvailable(&why, d);
    any_device = any_device || runs;
    out << "  " << d << ": " << prop.name << ", compute capability " << prop.major << "." << prop.minor << ", "
        << memory << ", " << prop.multiProcessorCount << " SMs: " << (runs ? "runs this build's kernels" : why) << "\n";
  }
  if (count == 0) {
    std::string why;
    cudaDeviceAvailable(&why);
    out << "  none usable: " << why << "\n";
  }

  bool blas = false;
  if (auto cublas = cuda::cublasLibrary(); cublas.ok()) {
    blas = true;
    out << "cuBLAS: loads from " << fileOf(reinterpret_cast<const void*>((*cublas)->cublasSgemm)) << "\n";
  } else {
    out << "cuBLAS: " << cublas.status().message() << "\n";
  }
#ifdef ZPS_HAVE_NCCL
  if (auto nccl = cuda::ncclLibrary(); nccl.ok()) {
    int version = 0;
    (*nccl)->ncclGetVersion(&version);
    out << "NCCL: " << version / 10000 << "." << version / 100 % 100 << "." << version % 100 << ", loads from "
        << fileOf(reinterpret_cast<const void*>((*nccl)->ncclGetVersion)) << "\n";
  } else {
    out << "NCCL: " << nccl.status().message() << "\n";
  }
#endif
  report.usable = any_device && blas;
  report.text = out.str();
  return report;
}

}  // namespace zps::kernels
