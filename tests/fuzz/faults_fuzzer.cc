// Fuzz target: parseFaultInjection (ps/transport/faulty_transport.h), the parser of ZPS_TEST_FAULTS.
// Test-only, but it reads the environment, and a transport built from a nonsense FaultInjection
// (a NaN probability, a negative delay) would misbehave far from the cause.
//
// Input: the whole input is the spec, e.g. "drop=0.05,dup=0.05,delay_ms=20".
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/transport/faulty_transport.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zps;
  fuzz::quietLogging();
  const std::string spec(reinterpret_cast<const char*>(data), size);
  auto f = parseFaultInjection(spec);
  if (!f.ok()) {
    ZPS_FUZZ_CHECK(f.status().code() == StatusCode::kInvalidArgument);
    return 0;
  }
  // What the transport relies on: probabilities that are numbers in [0, 1] summing to at most 1,
  // and a delay that is not negative.
  for (double p : {f->drop, f->duplicate, f->delay}) {
    ZPS_FUZZ_CHECK(std::isfinite(p) && p >= 0 && p <= 1);
  }
  ZPS_FUZZ_CHECK(f->drop + f->duplicate + f->delay <= 1);
  ZPS_FUZZ_CHECK(f->delay_ms >= 0);
  return 0;
}
