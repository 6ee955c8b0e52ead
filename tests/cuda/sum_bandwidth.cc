// zps_cuda_sum_bandwidth: the CUDA sum kernel's bandwidth as a share of the device's copy
// bandwidth. A sum dst += src moves 3 bytes per byte of tensor (read dst, read src, write dst), a
// device-to-device copy 2 (read, write); both are memory-bound, so the fair comparison is bytes
// moved per second. Prints one table and a line "sum/copy share: NN%"; exits 77 without a device
// (as tests/cuda do), 1 on a CUDA error, 0 otherwise. The share is reported, not judged: the
// target (>= 80%) is for the reader, since clocks and other tenants vary.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_sum.h"
#include "kernels/cuda_reducer.h"

namespace {

#define CHECK_CUDA(call)                                                     \
  do {                                                                       \
    const cudaError_t e = (call);                                            \
    if (e != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e)); \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

// Median milliseconds of `iters` runs of fn, timed with events on the default stream.
template <typename Fn>
float medianMs(Fn fn, int iters) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  fn();  // warm-up
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventRecord(start));
    fn();
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms[i], start, stop));
  }
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms[iters / 2];
}

}  // namespace

int main() {
  std::string why;
  if (!zps::kernels::cudaDeviceAvailable(&why, 0)) {
    const bool present = zps::kernels::cudaDeviceCount() > 0;  // then unusable is a failure
    std::printf("%s: %s\n", present ? "FAILED" : "SKIPPED", why.c_str());
    return present ? 1 : 77;
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device: %s\n", prop.name);
  std::printf("# %12s %10s %14s %14s %8s\n", "bytes", "dtype", "copy(GB/s)", "sum(GB/s)", "share");
  double last_share = 0;
  for (const size_t bytes : {size_t{16} << 20, size_t{256} << 20, size_t{1} << 30}) {
    for (const zps::DType dtype : {zps::DType::kFloat16, zps::DType::kFloat32}) {
      void* a = nullptr;
      void* b = nullptr;
      CHECK_CUDA(cudaMalloc(&a, bytes));
      CHECK_CUDA(cudaMalloc(&b, bytes));
      CHECK_CUDA(cudaMemset(a, 0, bytes));
      CHECK_CUDA(cudaMemset(b, 0, bytes));
      const size_t count = bytes / zps::dtypeSize(dtype);
      const float copy_ms =
          medianMs([&] { CHECK_CUDA(cudaMemcpyAsync(a, b, bytes, cudaMemcpyDeviceToDevice, nullptr)); }, 20);
      const float sum_ms = medianMs(
          [&] {
            if (!zps::kernels::cudaSumDevice(a, b, count, dtype, nullptr).ok()) std::exit(1);
          },
          20);
      const double copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
      const double sum_gbs = 3.0 * bytes / (sum_ms * 1e-3) / 1e9;
      last_share = sum_gbs / copy_gbs;
      std::printf("  %12zu %10s %14.1f %14.1f %7.0f%%\n", bytes, std::string(zps::dtypeName(dtype)).c_str(), copy_gbs,
                  sum_gbs, 100 * last_share);
      cudaFree(a);
      cudaFree(b);
    }
  }
  // The largest size is the steady-state figure; smaller ones show launch and tail effects.
  std::printf("sum/copy share: %.0f%% (1 GiB float32; read+write bytes per second)\n", 100 * last_share);
  return 0;
}
