// Settings as data: every process-wide setting zps reads (the DMLC environment that ps-lite, MXNet and
// BytePS users already set, ps-lite's PS_*, BytePS's BYTEPS_* and our own ZPS_*) is one row of
// settingsTable() (settings_table.cc): its environment names (the first one set wins), its command-line
// flag, type, default, range and help. The table drives reading and validating the values (loadConfig,
// loadObsConfig), the flags the zps binary accepts, `zps help env` and docs/configuration.md.
//
// Values from the environment and the command line are hostile: each read* function validates and
// returns an InvalidArgument whose message names the variable or flag and says what to set it to.
//
// Command-line values are process-wide: main stores them once (setFlagValue) before any thread reads
// them; the store is locked, so tests may change it between loads.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zps/status.h"

namespace zps {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup processEnv();  // getenv

enum class SettingType {
  kSeconds,   // a number of seconds, 0 or 0.001 to 2592000 (30 days)
  kInteger,   // a whole number in [min, max]
  kSwitch,    // 0 or 1 (a flag also takes true/false, and alone means 1)
  kFraction,  // a share in (0, 1]
  kText,      // any text, trimmed
  kChoice,    // one of `choices`
};
const char* settingTypeName(SettingType type);

struct Setting {
  std::string name;              // the flag's name without "--" (also the setting's key)
  bool flag = true;              // false: environment only
  std::vector<std::string> env;  // environment variables; the first one set wins
  SettingType type = SettingType::kText;
  std::string default_text;          // as users write it; parsed like any value
  long long min = 0, max = 0;        // kInteger's range
  std::vector<std::string> choices;  // kChoice's words
  std::string noun;                  // kChoice, for messages: "'gpu' is not <an engine>"
  std::string hint;                  // what to set it to, for messages; empty: from the type and range
  std::string help;
  std::string group;           // the heading it appears under in help and docs
  bool blank_is_unset = true;  // an empty (or blank) variable counts as not set, not as an error
  bool required = false;       // no default: a process that needs it fails without it
  // The word "auto" (then the default) leaves the value to zps, which chooses it from the job's layout
  // once every node has registered (ps/node/job_layout.h); read with readIntegerOrAuto/readSwitchOrAuto.
  bool accepts_auto = false;
};

// Every setting, grouped in the order help and docs print them.
const std::vector<Setting>& settingsTable();
// The setting with this name; nullptr when there is none.
const Setting* findSetting(std::string_view name);

// A flag given on the command line wins over the environment. setFlagValue refuses names that are
// not a setting's flag.
Status setFlagValue(const std::string& name, const std::string& text);
std::optional<std::string> flagValue(const std::string& name);
// Restores the command-line values it found when it goes out of scope (tests, fuzzers).
class FlagValuesSaver {
 public:
  FlagValuesSaver();
  ~FlagValuesSaver();
  FlagValuesSaver(const FlagValuesSaver&) = delete;
  FlagValuesSaver& operator=(const FlagValuesSaver&) = delete;

 private:
  std::map<std::string, std::string> saved_;
};

// A setting's text and where it came from ("--name" or the variable's name): the flag when given,
// else the first environment variable set, else nullopt (the default applies).
struct SettingText {
  std::string source;
  std::string text;
};
std::optional<SettingText> settingText(const EnvLookup& env, const Setting& setting);

// Typed reads of the setting `name` (which must be in the table, with that type): the flag, the
// environment or the default, validated.
StatusOr<std::chrono::milliseconds> readSeconds(const EnvLookup& env, std::string_view name);
StatusOr<long long> readInteger(const EnvLookup& env, std::string_view name);
StatusOr<bool> readSwitch(const EnvLookup& env, std::string_view name);
// Settings that accept "auto" (Setting::accepts_auto): nullopt when zps is to choose.
StatusOr<std::optional<long long>> readIntegerOrAuto(const EnvLookup& env, std::string_view name);
StatusOr<std::optional<bool>> readSwitchOrAuto(const EnvLookup& env, std::string_view name);
StatusOr<double> readFraction(const EnvLookup& env, std::string_view name);
StatusOr<std::string> readText(const EnvLookup& env, std::string_view name);  // kText and kChoice

// Strict parsers behind the reads. `name` appears in the error message; a hint adds "; set it to <hint>".
StatusOr<long long> parseInteger(const std::string& name, const std::string& value, long long min, long long max,
                                 const std::string& hint);
StatusOr<std::chrono::milliseconds> parseSeconds(const std::string& name, const std::string& value,
                                                 const std::string& hint);
// A share in (0, 1], e.g. ZPS_COMPRESS_RATIO=0.01.
StatusOr<double> parseFraction(const std::string& name, const std::string& value);
std::string trimSpace(const std::string& s);  // without leading and trailing spaces, tabs and newlines

}  // namespace zps
