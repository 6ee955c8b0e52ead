// Fuzz target: the environment and flag parser (ps/common/config): loadConfig, parseInteger and
// parseSeconds. The environment of a pod is outside input as much as a peer's bytes are: a typo in
// a manifest must give a clear error, never a crash or a nonsense Config.
//
// Input: lines. "NAME=VALUE" puts NAME in the environment that loadConfig sees (the last one wins;
// a value may hold any byte but a newline). "--flag=value" sets a setting's flag (settings_table.cc),
// as if given on the command line (flags win over the environment); flags are restored after each input.
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "ps/common/config.h"
#include "tests/fuzz/fuzz_util.h"

namespace zps::fuzz {
namespace {

bool validDuration(std::chrono::milliseconds d) { return d.count() >= 0 && d.count() <= 30LL * 24 * 3600 * 1000; }

// What a Config that loadConfig accepted must satisfy, whatever the input.
void checkConfig(const Config& c) {
  ZPS_FUZZ_CHECK(c.num_servers >= 1 && c.num_servers <= 65535);
  ZPS_FUZZ_CHECK(c.num_workers >= 1 && c.num_workers <= 65535);
  ZPS_FUZZ_CHECK(c.root_port >= 1 && c.root_port <= 65535);
  ZPS_FUZZ_CHECK(c.node_port >= 0 && c.node_port <= 65535);
  ZPS_FUZZ_CHECK(c.verbose >= 0 && c.verbose <= 3);
  ZPS_FUZZ_CHECK(c.requested_rank >= -1);
  if (c.role != Role::kScheduler) ZPS_FUZZ_CHECK(!c.root_uri.empty());
  for (auto d : {c.rendezvous_timeout, c.rendezvous_log_interval, c.connect_timeout, c.heartbeat_interval,
                 c.heartbeat_timeout, c.request_timeout, c.shutdown_linger, c.resend_timeout}) {
    ZPS_FUZZ_CHECK(validDuration(d));
  }
  ZPS_FUZZ_CHECK(c.heartbeat_interval.count() > 0);
  ZPS_FUZZ_CHECK(c.heartbeat_timeout >= 2 * c.heartbeat_interval);
  ZPS_FUZZ_CHECK(c.partition_bytes >= 64 && c.partition_bytes <= c.max_message_bytes);
  ZPS_FUZZ_CHECK(c.server_engine_threads >= 1 && c.server_engine_threads <= 256);
  ZPS_FUZZ_CHECK(c.checkpoint_every >= 0);
}

}  // namespace
}  // namespace zps::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zps;
  fuzz::quietLogging();
  FlagValuesSaver restore_flags_after_this_input;

  std::map<std::string, std::string> env;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string name(line.substr(0, eq)), value(line.substr(eq + 1));
    if (name.size() > 2 && name.compare(0, 2, "--") == 0) {
      // Any text, as on a real command line: loadConfig validates flags as it does the environment.
      // A name that is not a setting's flag is refused, as the command-line parser refuses it.
      (void)setFlagValue(name.substr(2), value);
      continue;
    }
    env[name] = value;
  }
  EnvLookup lookup = [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };

  // DMLC_ROLE from the environment, then a role forced, as the binaries and tests call it. One
  // forced role per input (chosen by its size, so mutations try all three): each loadConfig reads
  // the network interfaces, which is most of an exec's time.
  if (auto c = loadConfig(lookup); c.ok()) {
    fuzz::checkConfig(*c);
  } else {
    ZPS_FUZZ_CHECK(!c.status().message().empty());
  }
  const Role forced[] = {Role::kScheduler, Role::kServer, Role::kWorker};
  const Role role = forced[size % 3];
  if (auto c = loadConfig(lookup, role); c.ok()) {
    ZPS_FUZZ_CHECK(c->role == role);
    fuzz::checkConfig(*c);
  }

  // The strict parsers on every value, with the ranges loadConfig uses and the widest ones.
  for (const auto& [name, value] : env) {
    if (auto n = parseInteger(name, value, LLONG_MIN, LLONG_MAX, ""); n.ok()) (void)*n;
    if (auto n = parseInteger(name, value, 0, 65535, "a TCP port"); n.ok()) ZPS_FUZZ_CHECK(*n >= 0 && *n <= 65535);
    if (auto n = parseInteger(name, value, 1, 1, "1"); n.ok()) ZPS_FUZZ_CHECK(*n == 1);
    if (auto s = parseSeconds(name, value, "seconds"); s.ok()) ZPS_FUZZ_CHECK(fuzz::validDuration(*s));
  }
  return 0;
}
