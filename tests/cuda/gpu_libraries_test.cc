// cuBLAS and NCCL are loaded on first use, not at start (kernels/cuda/gpu_libraries.h). Needs no GPU:
// loading a library and resolving its functions does not touch the device, so this runs in CI.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/cuda/gpu_libraries.h"
#include "kernels/cuda_reducer.h"

namespace {

bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using namespace zps::kernels::cuda;
  check(!mapped("libcublas"), "libcublas is not mapped before its first use");
  auto cublas = cublasLibrary();
  check(cublas.ok(), "cuBLAS loads: " + (cublas.ok() ? std::string("yes") : cublas.status().toString()));
  if (cublas.ok()) {
    check(mapped("libcublas"), "libcublas is mapped after the first use");
    check(cublas.value()->cublasSgemm != nullptr && cublas.value()->cublasCreate != nullptr,
          "cublasSgemm and cublasCreate resolved");
    check(cublasLibrary().value() == cublas.value(), "a second use returns the same library");
  }
  // The driver's context queries behind isDevicePointer: wherever there is a device there is a
  // driver, and these entry points must resolve (else every GPU tensor costs a context check).
  auto driver = driverLibrary();
  const bool have_device = zps::kernels::cudaDeviceCount() > 0;
  check(driver.ok() || !have_device,
        "the driver API loads where there is a device: " + (driver.ok()   ? std::string("yes")
                                                            : have_device ? driver.status().toString()
                                                                          : "no device here"));
#ifdef ZPS_HAVE_NCCL
  check(!mapped("libnccl"), "libnccl is not mapped before its first use");
  auto nccl = ncclLibrary();
  check(nccl.ok(), "NCCL loads: " + (nccl.ok() ? std::string("yes") : nccl.status().toString()));
  if (nccl.ok()) check(nccl.value()->ncclReduceScatter != nullptr, "ncclReduceScatter resolved");
#else
  std::printf("NCCL: this build has no NCCL headers, nothing to load\n");
#endif
  return failures == 0 ? 0 : 1;
}
