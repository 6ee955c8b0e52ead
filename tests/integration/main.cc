// The integration tests' main: the zps binary and the data folder come from the build (overridable with
// ZPS_BIN and ZPS_DATA_DIR), so the tests run the same under ctest and by hand.
#define CATCH_CONFIG_RUNNER
#include <cstdlib>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  setenv("ZPS_BIN", ZPS_TEST_BIN, /*overwrite=*/0);
  setenv("ZPS_DATA_DIR", ZPS_TEST_DATA_DIR, /*overwrite=*/0);
  return Catch::Session().run(argc, argv);
}
