// Runner for zps_cuda_tests: skips the whole binary, with the reason, when no CUDA device can run
// this build's kernels (ctest SKIP_RETURN_CODE 77, see CMakeLists.txt).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "kernels/cuda_reducer.h"

namespace {
constexpr int kSkipExitCode = 77;
}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!zps::kernels::cudaDeviceAvailable(&why)) {
    std::printf("SKIPPED: %s\n", why.c_str());
    return kSkipExitCode;
  }
  const int failed = Catch::Session().run(argc, argv);
  // Catch returns the failure count, which must never read as "skipped".
  return failed == 0 ? 0 : 1;
}
