// Runner for zps_cuda_tests: skips the whole binary, with the reason, when there is no CUDA device
// (ctest SKIP_RETURN_CODE 77, see CMakeLists.txt), and fails when one is there but cannot run this
// build's kernels.
#include <cstdio>
#include <string>

#include "kernels/cuda_reducer.h"
#include "tests/catch_session.h"

namespace {
constexpr int kSkipExitCode = 77;
}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!zps::kernels::cudaDeviceAvailable(&why)) {
    // A device that is there but cannot run this build's kernels (no image for its architecture,
    // a busy exclusive-mode GPU) is a failure to report, not a machine without a GPU.
    if (zps::kernels::cudaDeviceCount() > 0) {
      std::printf("FAILED: a CUDA device is present but unusable: %s\n", why.c_str());
      return 1;
    }
    std::printf("SKIPPED: %s\n", why.c_str());
    return kSkipExitCode;
  }
  const int failed = zps::testing::runCatchSession(argc, argv);
  // Catch returns the failure count, which must never read as "skipped".
  return failed == 0 ? 0 : 1;
}
