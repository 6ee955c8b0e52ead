// Tests for the settings (ps/common/setting.h, settings/*.h, settings_table.cc): every constant is in
// the table (whose rows `zps help env` and docs/configuration.md print: cli/configuration_docs), the
// defaults agree with Config's and ObsConfig's and with the code's own limits; a flag wins over the
// environment and the first variable set wins, and a bad value's message names where it came from.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "ps/common/config.h"
#include "ps/common/setting.h"
#include "ps/common/settings.h"
#include "ps/node/job_layout.h"
#include "ps/node/observability.h"
#include "tests/unit/env_lookup.h"
#include "tools/command_line.h"

namespace zps {
namespace {

using std::chrono::milliseconds;
using testing::Env;
using testing::lookup;

// The value of a read that must succeed.
template <typename T>
T valueOf(StatusOr<T> read) {
  INFO((read.ok() ? "" : read.status().message()));
  REQUIRE(read.ok());
  return *read;
}

// "local_size" -> "kLocalSize": the constant settings.h declares for a setting.
std::string constantName(std::string_view name) {
  std::string out = "k";
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

TEST_CASE("settings: every constant of settings/*.h is in the table, once, under its own name", "[settings]") {
  std::set<std::string> declared;
  const std::regex constant(R"(inline constexpr Setting (k\w+)\{)");
  for (const auto& part : std::filesystem::directory_iterator(ZPS_SOURCE_DIR "/ps/common/settings")) {
    std::ifstream in(part.path());
    REQUIRE(in.good());
    std::stringstream text;
    text << in.rdbuf();
    const std::string header = text.str();
    for (auto it = std::sregex_iterator(header.begin(), header.end(), constant); it != std::sregex_iterator(); ++it)
      declared.insert((*it)[1]);
  }
  std::set<std::string> listed;
  for (const Setting& s : settingsTable()) {
    INFO(s.name);
    CHECK(listed.insert(constantName(s.name)).second);
    // Every row is valid (settings_table.cc checks it when it compiles; here at run time too).
    CHECK(validSetting(s));
  }
  CHECK(declared == listed);
  CHECK(declared.size() == settingsTable().size());
  CHECK(findSetting("rendezvous_timeout") == &settings::kRendezvousTimeout);
  CHECK(findSetting("no_such_setting") == nullptr);
}

TEST_CASE("settings: the settings a command lists exist", "[settings]") {
  for (const CommandInfo& c : commands()) {
    for (const std::string& name : c.settings) {
      INFO(commandName(c) << " lists " << name);
      CHECK((name == "*" || findSetting(name) != nullptr));
    }
  }
}

TEST_CASE("settings: every default is a valid value", "[settings]") {
  const EnvLookup empty = lookup({});
  for (const Setting& s : settingsTable()) {
    // Required settings have no default; nor have the ranks, whose absence resolveRequestedRank reads
    // as "the hostname, else the order of arrival".
    if (s.required || (s.type == SettingType::kInteger && s.default_text.empty())) continue;
    INFO(s.name << " default '" << s.default_text << "'");
    switch (s.type) {
      case SettingType::kSeconds: CHECK(readSeconds(empty, s).ok()); break;
      case SettingType::kInteger:
        CHECK((s.accepts_auto ? readIntegerOrAuto(empty, s).ok() : readInteger(empty, s).ok()));
        break;
      case SettingType::kSwitch:
        CHECK((s.accepts_auto ? readSwitchOrAuto(empty, s).ok() : readSwitch(empty, s).ok()));
        break;
      case SettingType::kFraction: CHECK(readFraction(empty, s).ok()); break;
      case SettingType::kText:
      case SettingType::kChoice: CHECK(readText(empty, s).ok()); break;
    }
  }
}

TEST_CASE("settings: the table's defaults are Config's and ObsConfig's", "[settings]") {
  Env env = {{"DMLC_ROLE", "worker"},       {"DMLC_NUM_SERVER", "1"},         {"DMLC_NUM_WORKER", "1"},
             {"DMLC_PS_ROOT_PORT", "9000"}, {"DMLC_PS_ROOT_URI", "10.0.0.1"}, {"DMLC_NODE_HOST", "10.0.0.5"},
             {"HOSTNAME", "testhost"}};
  auto c = loadConfig(lookup(env));
  REQUIRE(c.ok());
  const Config d;
  CHECK(c->rendezvous_timeout == d.rendezvous_timeout);
  CHECK(c->rendezvous_log_interval == d.rendezvous_log_interval);
  CHECK(c->connect_timeout == d.connect_timeout);
  CHECK(c->heartbeat_interval == d.heartbeat_interval);
  CHECK(c->heartbeat_timeout == d.heartbeat_timeout);
  CHECK(c->request_timeout == d.request_timeout);
  CHECK(c->shutdown_linger == d.shutdown_linger);
  CHECK(c->resend_timeout == d.resend_timeout);
  CHECK(c->recovery_timeout == d.recovery_timeout);
  CHECK(c->partition_bytes == d.partition_bytes);
  CHECK(c->server_engine_threads == d.server_engine_threads);
  CHECK(c->max_message_bytes == d.max_message_bytes);
  CHECK(c->checkpoint_dir == d.checkpoint_dir);
  CHECK(c->checkpoint_every == d.checkpoint_every);
  CHECK(c->enable_async == d.enable_async);
  CHECK(c->server_engine == d.server_engine);
  CHECK(c->local_rank == d.local_rank);
  CHECK(c->local_size == d.local_size);
  CHECK(c->shm_dir == d.shm_dir);
  CHECK(c->local_reduce == d.local_reduce);
  CHECK(c->curve == d.curve);
  CHECK(c->recovery == d.recovery);
  CHECK(c->compressor == d.compressor);
  CHECK(c->compress_ratio == d.compress_ratio);
  CHECK(c->min_compress_bytes == d.min_compress_bytes);
  CHECK(c->verbose == d.verbose);
  CHECK(c->node_port == d.node_port);

  auto o = loadObsConfig(lookup({}));
  REQUIRE(o.ok());
  const ObsConfig od;
  CHECK(o->metrics_port == od.metrics_port);
  // No ZPS_METRICS_HOST: the endpoint listens where the node does (ZPS_BIND_HOST, here its default).
  CHECK(o->metrics_host == "0.0.0.0");
  CHECK(o->trace_on == od.trace_on);
  CHECK(o->trace_start_step == od.trace_start_step);
  CHECK(o->trace_end_step == od.trace_end_step);
  CHECK(o->trace_dir == od.trace_dir);
}

TEST_CASE("settings: the table agrees with the code's own limits and names", "[settings]") {
  CHECK(settings::kLocalSize.max == kMaxLocalSize);
  // The help of ZPS_PARTITION_BYTES names the sizes "auto" chooses (ps/node/job_layout.h).
  const std::string partition_help(settings::kPartitionBytes.help);
  CHECK_THAT(partition_help, Catch::Contains("auto: " + std::to_string(kOneHostPartitionBytes) + " when every worker"));
  CHECK_THAT(partition_help, Catch::Contains(std::to_string(kNetworkPartitionBytes) + " when the job spans hosts"));
  CHECK(settings::kLocalRank.max == kMaxLocalSize - 1);
  for (std::string_view c : settings::kCompressor.choices) {
    INFO(c);
    CHECK(compressorFromName(std::string(c)).has_value());
  }
  auto bad = readText(lookup({{"ZPS_COMPRESSOR", "gzip"}}), settings::kCompressor);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "ZPS_COMPRESSOR='gzip' is not a compressor; set it to " + std::string(kCompressorNames));
}

TEST_CASE("settings: a flag wins over the environment, the first variable set over the others", "[settings]") {
  FlagValuesSaver restore;
  Env env = {{"PS_HEARTBEAT_INTERVAL", "2"}};
  CHECK(valueOf(readSeconds(lookup(env), settings::kHeartbeatInterval)) == milliseconds(2000));
  env["ZPS_HEARTBEAT_INTERVAL"] = "3";
  CHECK(valueOf(readSeconds(lookup(env), settings::kHeartbeatInterval)) == milliseconds(3000));
  REQUIRE(setFlagValue("heartbeat_interval", "4").ok());
  CHECK(valueOf(readSeconds(lookup(env), settings::kHeartbeatInterval)) == milliseconds(4000));
  REQUIRE(setFlagValue("heartbeat_interval", "soon").ok());
  auto bad = readSeconds(lookup(env), settings::kHeartbeatInterval);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "--heartbeat_interval='soon' is not a number of seconds; set it to a number of seconds, e.g. "
        "--heartbeat_interval=30");
  // Environment-only settings have no flag.
  CHECK_FALSE(setFlagValue("auth_token", "secret").ok());
  CHECK_FALSE(setFlagValue("no_such_setting", "1").ok());
}

TEST_CASE("settings: flags restored by FlagValuesSaver", "[settings]") {
  {
    FlagValuesSaver restore;
    REQUIRE(setFlagValue("recovery", "true").ok());
    CHECK(valueOf(readSwitch(lookup({}), settings::kRecovery)));
    REQUIRE(setFlagValue("recovery", "").ok());  // `--recovery` alone
    CHECK(valueOf(readSwitch(lookup({}), settings::kRecovery)));
    REQUIRE(setFlagValue("recovery", "0").ok());
    CHECK_FALSE(valueOf(readSwitch(lookup({{"ZPS_RECOVERY", "1"}}), settings::kRecovery)));
  }
  CHECK_FALSE(flagValue("recovery").has_value());
  CHECK(valueOf(readSwitch(lookup({{"ZPS_RECOVERY", "1"}}), settings::kRecovery)));
}

TEST_CASE("settings: blank variables and required settings", "[settings]") {
  // A blank text or choice counts as not set; a blank number where that is an error says so.
  CHECK(valueOf(readText(lookup({{"ZPS_SHM_DIR", "  "}}), settings::kShmDir)) == "/dev/shm");
  CHECK(valueOf(readText(lookup({{"ZPS_SERVER_ENGINE", ""}}), settings::kServerEngine)) == "auto");
  auto blank = readIntegerOrAuto(lookup({{"ZPS_PARTITION_BYTES", ""}}), settings::kPartitionBytes);
  REQUIRE_FALSE(blank.ok());
  CHECK(blank.status().message() ==
        "ZPS_PARTITION_BYTES is empty; set it to auto or a whole number in [64, 1073741824]");
  auto missing = readInteger(lookup({{"DMLC_NUM_WORKER", " "}}), settings::kNumWorkers);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "DMLC_NUM_WORKER is not set; set it to the number of worker nodes, e.g. DMLC_NUM_WORKER=2");
  // The second variable counts when the first is blank.
  CHECK(valueOf(readInteger(lookup({{"DMLC_PORT", ""}, {"PORT", "9100"}}), settings::kNodePort)) == 9100);
}

}  // namespace
}  // namespace zps
