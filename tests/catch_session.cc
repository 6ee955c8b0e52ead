// Catch2's implementation, compiled once for every test binary. (It is a test build's slowest file:
// compiling it once instead of once per binary takes about a minute off a clean build on two cores.)
#define CATCH_CONFIG_RUNNER
#include "tests/catch_session.h"

#include <catch2/catch.hpp>

namespace zps::testing {
int runCatchSession(int argc, char** argv) { return Catch::Session().run(argc, argv); }
}  // namespace zps::testing
