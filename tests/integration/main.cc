// The integration tests' main: the zps binary and the data folder come from the build (overridable with
// ZPS_BIN and ZPS_DATA_DIR), so the tests run the same under ctest and by hand.
//
// `zps_integration_tests --null-buffer-worker` is instead a worker program of its own, for a test that
// needs a call `zps check` never makes: every local rank push-pulls one tensor for a round, and local
// rank 1 passes a null input buffer.
#define CATCH_CONFIG_RUNNER
#include <zps/worker.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include <catch2/catch.hpp>

namespace {

int nullBufferWorker() {
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "null-buffer-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  zps::Worker& w = **worker;
  std::vector<float> in(1024, 1.0f), out(1024);
  auto tensor = w.declare("null-buffer/grad", in.size() * sizeof(float), zps::DType::kFloat32);
  if (!tensor.ok()) return w.finish(tensor.status());
  auto handle = w.pushPull(*tensor, w.localRank() == 1 ? nullptr : in.data(), out.data());
  zps::Status result = handle.ok() ? w.wait(*handle) : handle.status();
  std::cerr << "null-buffer-worker local rank " << w.localRank() << ": "
            << (result.ok() ? "push-pull done" : result.message()) << std::endl;
  return w.finish(result);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--null-buffer-worker") == 0) return nullBufferWorker();
  setenv("ZPS_BIN", ZPS_TEST_BIN, /*overwrite=*/0);
  setenv("ZPS_DATA_DIR", ZPS_TEST_DATA_DIR, /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
