// parseFaultInjection: reads ZPS_TEST_FAULTS (see FaultInjection in faulty_transport.h). Kept apart from
// the transport that applies the faults: it is plain text parsing.
#include <cmath>
#include <sstream>

#include "ps/transport/faulty_transport.h"

namespace zps {

StatusOr<FaultInjection> parseFaultInjection(const std::string& spec) {
  FaultInjection f;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char* end = nullptr;
    double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0)
      return InvalidArgument("ZPS_TEST_FAULTS: '" + item + "' is not name=number");
    if (key == "drop")
      f.drop = v;
    else if (key == "dup")
      f.duplicate = v;
    else if (key == "delay")
      f.delay = v;
    else if (key == "delay_ms" && v <= 60000)
      f.delay_ms = static_cast<int>(v);
    else if (key == "seed" && v < 9007199254740992.0)
      f.seed = static_cast<uint64_t>(v);
    else if (key == "delay_ms" || key == "seed")
      return InvalidArgument("ZPS_TEST_FAULTS: '" + item + "' is out of range (delay_ms <= 60000, seed < 2^53)");
    else
      return InvalidArgument("ZPS_TEST_FAULTS: unknown fault '" + key + "' (drop, dup, delay, delay_ms, seed)");
  }
  if (f.drop > 1 || f.duplicate > 1 || f.delay > 1 || f.drop + f.duplicate + f.delay > 1)
    return InvalidArgument("ZPS_TEST_FAULTS: probabilities must add up to at most 1");
  return f;
}

}  // namespace zps
