// Runs Catch2's tests of this binary with its command line; returns Catch's result (the number of
// failed assertions, capped at 255). Catch2's implementation is compiled once, in catch_session.cc,
// for every test binary: each binary's main.cc calls this instead of defining CATCH_CONFIG_RUNNER.
#pragma once

namespace zps::testing {
int runCatchSession(int argc, char** argv);
}  // namespace zps::testing
