// Tests for the table of settings (ps/common/setting.h, settings_table.cc): the rows are complete and
// their defaults agree with Config's and ObsConfig's, a flag wins over the environment and the first
// variable set wins, and a bad value's message names where it came from.
#include <chrono>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "ps/common/config.h"
#include "ps/common/setting.h"
#include "ps/node/observability.h"
#include "tests/unit/env_lookup.h"

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

TEST_CASE("settings: every row is complete and names are unique", "[settings]") {
  std::set<std::string> names, flags;
  for (const Setting& s : settingsTable()) {
    INFO(s.name);
    CHECK_FALSE(s.name.empty());
    CHECK_FALSE(s.help.empty());
    CHECK_FALSE(s.group.empty());
    CHECK((s.flag || !s.env.empty()));
    CHECK(names.insert(s.name).second);
    if (s.type == SettingType::kChoice) {
      CHECK_FALSE(s.choices.empty());
      CHECK_FALSE(s.noun.empty());
    }
    if (s.type == SettingType::kInteger) CHECK(s.min <= s.max);
  }
  CHECK(findSetting("rendezvous_timeout") != nullptr);
  CHECK(findSetting("no_such_setting") == nullptr);
}

TEST_CASE("settings: every default is a valid value", "[settings]") {
  const EnvLookup empty = lookup({});
  for (const Setting& s : settingsTable()) {
    // Required settings have no default; nor have the ranks, whose absence resolveRequestedRank reads
    // as "the hostname, else the order of arrival".
    if (s.required || (s.type == SettingType::kInteger && s.default_text.empty())) continue;
    INFO(s.name << " default '" << s.default_text << "'");
    switch (s.type) {
      case SettingType::kSeconds: CHECK(readSeconds(empty, s.name).ok()); break;
      case SettingType::kInteger:
        CHECK((s.accepts_auto ? readIntegerOrAuto(empty, s.name).ok() : readInteger(empty, s.name).ok()));
        break;
      case SettingType::kSwitch:
        CHECK((s.accepts_auto ? readSwitchOrAuto(empty, s.name).ok() : readSwitch(empty, s.name).ok()));
        break;
      case SettingType::kFraction: CHECK(readFraction(empty, s.name).ok()); break;
      case SettingType::kText:
      case SettingType::kChoice: CHECK(readText(empty, s.name).ok()); break;
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
  CHECK(findSetting("local_size")->max == kMaxLocalSize);
  CHECK(findSetting("local_rank")->max == kMaxLocalSize - 1);
  for (const std::string& c : findSetting("compressor")->choices) {
    INFO(c);
    CHECK(compressorFromName(c).has_value());
  }
  auto bad = readText(lookup({{"ZPS_COMPRESSOR", "gzip"}}), "compressor");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "ZPS_COMPRESSOR='gzip' is not a compressor; set it to " + std::string(kCompressorNames));
}

TEST_CASE("settings: a flag wins over the environment, the first variable set over the others", "[settings]") {
  FlagValuesSaver restore;
  Env env = {{"PS_HEARTBEAT_INTERVAL", "2"}};
  CHECK(valueOf(readSeconds(lookup(env), "heartbeat_interval")) == milliseconds(2000));
  env["ZPS_HEARTBEAT_INTERVAL"] = "3";
  CHECK(valueOf(readSeconds(lookup(env), "heartbeat_interval")) == milliseconds(3000));
  REQUIRE(setFlagValue("heartbeat_interval", "4").ok());
  CHECK(valueOf(readSeconds(lookup(env), "heartbeat_interval")) == milliseconds(4000));
  REQUIRE(setFlagValue("heartbeat_interval", "soon").ok());
  auto bad = readSeconds(lookup(env), "heartbeat_interval");
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
    CHECK(valueOf(readSwitch(lookup({}), "recovery")));
    REQUIRE(setFlagValue("recovery", "").ok());  // `--recovery` alone
    CHECK(valueOf(readSwitch(lookup({}), "recovery")));
    REQUIRE(setFlagValue("recovery", "0").ok());
    CHECK_FALSE(valueOf(readSwitch(lookup({{"ZPS_RECOVERY", "1"}}), "recovery")));
  }
  CHECK_FALSE(flagValue("recovery").has_value());
  CHECK(valueOf(readSwitch(lookup({{"ZPS_RECOVERY", "1"}}), "recovery")));
}

TEST_CASE("settings: blank variables and required settings", "[settings]") {
  // A blank text or choice counts as not set; a blank number where that is an error says so.
  CHECK(valueOf(readText(lookup({{"ZPS_SHM_DIR", "  "}}), "shm_dir")) == "/dev/shm");
  CHECK(valueOf(readText(lookup({{"ZPS_SERVER_ENGINE", ""}}), "server_engine")) == "auto");
  auto blank = readIntegerOrAuto(lookup({{"ZPS_PARTITION_BYTES", ""}}), "partition_bytes");
  REQUIRE_FALSE(blank.ok());
  CHECK(blank.status().message() ==
        "ZPS_PARTITION_BYTES is empty; set it to auto or a whole number in [64, 1073741824]");
  auto missing = readInteger(lookup({{"DMLC_NUM_WORKER", " "}}), "num_workers");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "DMLC_NUM_WORKER is not set; set it to the number of worker nodes, e.g. DMLC_NUM_WORKER=2");
  // The second variable counts when the first is blank.
  CHECK(valueOf(readInteger(lookup({{"DMLC_PORT", ""}, {"PORT", "9100"}}), "node_port")) == 9100);
}

}  // namespace
}  // namespace zps
