// Settings as data: every process-wide setting zps reads (the DMLC environment that ps-lite, MXNet and
// BytePS users already set, ps-lite's PS_*, BytePS's BYTEPS_* and our own ZPS_*) is one constant of
// settings.h: its name, environment names (the first one set wins), command-line flag, type, default,
// range and help. Code reads a setting through its constant (readInteger(env, settings::kLocalSize)), so
// a misspelt setting does not compile; Config's defaults are the constants' defaults (integerDefault and
// the others below, which refuse at compile time a default that is not a valid value). The table of
// every constant (settingsTable, settings_table.cc) drives the flags the zps binary accepts, `zps help
// env`, docs/configuration.md and the C API's zps_setting_* functions.
//
// Values from the environment and the command line are hostile: each read* function validates and
// returns an InvalidArgument whose message names the variable or flag and says what to set it to.
//
// Command-line values are process-wide: main stores them once (setFlagValue) before any thread reads
// them; the store is locked, so tests may change it between loads.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

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

// A few words known at compile time: a setting's environment names or its choices.
class Words {
 public:
  static constexpr size_t kCapacity = 4;
  constexpr Words() = default;
  constexpr Words(std::initializer_list<std::string_view> words) {
    if (words.size() > kCapacity) throw "a setting has at most 4 environment names or choices";
    for (std::string_view w : words) words_[size_++] = w;
  }
  constexpr const std::string_view* begin() const { return words_; }
  constexpr const std::string_view* end() const { return words_ + size_; }
  constexpr size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr std::string_view front() const { return words_[0]; }
  constexpr std::string_view operator[](size_t i) const { return words_[i]; }

 private:
  std::string_view words_[kCapacity] = {};
  size_t size_ = 0;
};

struct Setting {
  std::string_view name;  // the flag's name without "--" (also the setting's key)
  bool flag = true;       // false: environment only
  Words env;              // environment variables; the first one set wins
  SettingType type = SettingType::kText;
  std::string_view default_text;  // as users write it; parsed like any value
  long long min = 0, max = 0;     // kInteger's range
  Words choices;                  // kChoice's words
  std::string_view noun;          // kChoice, for messages: "'gpu' is not <an engine>"
  std::string_view hint;          // what to set it to, for messages; empty: from the type and range
  std::string_view help;
  std::string_view group;      // the heading it appears under in help and docs
  bool blank_is_unset = true;  // an empty (or blank) variable counts as not set, not as an error
  bool required = false;       // no default: a process that needs it fails without it
  // The word "auto" (then the default) leaves the value to zps, which chooses it from the job's layout
  // once every node has registered (ps/node/job_layout.h); read with readIntegerOrAuto/readSwitchOrAuto.
  bool accepts_auto = false;
};

// Every setting, grouped in the order help and docs print them.
std::span<const std::reference_wrapper<const Setting>> settingsTable();
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

// Typed reads of a setting (of that type; another type is a bug in the caller): the flag, the
// environment or the default, validated.
StatusOr<std::chrono::milliseconds> readSeconds(const EnvLookup& env, const Setting& setting);
StatusOr<long long> readInteger(const EnvLookup& env, const Setting& setting);
StatusOr<bool> readSwitch(const EnvLookup& env, const Setting& setting);
// Settings that accept "auto" (Setting::accepts_auto): nullopt when zps is to choose.
StatusOr<std::optional<long long>> readIntegerOrAuto(const EnvLookup& env, const Setting& setting);
StatusOr<std::optional<bool>> readSwitchOrAuto(const EnvLookup& env, const Setting& setting);
StatusOr<double> readFraction(const EnvLookup& env, const Setting& setting);
StatusOr<std::string> readText(const EnvLookup& env, const Setting& setting);  // kText and kChoice

// readInteger into a field of another integer type.
template <typename Int>
Status readInto(Int* out, const EnvLookup& env, const Setting& setting) {
  ZPS_ASSIGN_OR_RETURN(long long value, readInteger(env, setting));
  *out = static_cast<Int>(value);
  return Status::OK();
}

// A setting's default as the value its read returns, for Config's defaults. Evaluated by the compiler:
// a default that is not a valid value of its setting (a word for a number, out of range, "auto" where
// the setting takes none) does not compile. validSetting checks a whole row the same way.
consteval long long integerDefault(const Setting& s);
consteval std::chrono::milliseconds secondsDefault(const Setting& s);
consteval bool switchDefault(const Setting& s);
consteval double fractionDefault(const Setting& s);
constexpr bool validSetting(const Setting& s);

// Strict parsers behind the reads. `name` appears in the error message; a hint adds "; set it to <hint>".
StatusOr<long long> parseInteger(const std::string& name, const std::string& value, long long min, long long max,
                                 const std::string& hint);
StatusOr<std::chrono::milliseconds> parseSeconds(const std::string& name, const std::string& value,
                                                 const std::string& hint);
// A share in (0, 1], e.g. ZPS_COMPRESS_RATIO=0.01.
StatusOr<double> parseFraction(const std::string& name, const std::string& value);
std::string trimSpace(const std::string& s);  // without leading and trailing spaces, tabs and newlines

// The compile-time parsers behind integerDefault and the others: they accept what the reads accept
// (without spaces) and throw, which in a constant expression is a compile error, on anything else.
namespace setting_defaults {

constexpr long long wholeNumber(std::string_view t) {
  const bool negative = !t.empty() && t[0] == '-';
  if (negative) t.remove_prefix(1);
  if (t.empty() || t.size() > 18) throw "a setting's default is not a whole number";
  long long n = 0;
  for (char c : t) {
    if (c < '0' || c > '9') throw "a setting's default is not a whole number";
    n = n * 10 + (c - '0');
  }
  return negative ? -n : n;
}

// "12.5" as 125 and one decimal place: exact, so that the value below rounds as strtod's does.
struct Decimal {
  long long digits = 0;
  int places = 0;
};
constexpr Decimal decimal(std::string_view t) {
  const size_t point = t.find('.');
  if (point == std::string_view::npos) return {wholeNumber(t), 0};
  const std::string_view fraction = t.substr(point + 1);
  if (fraction.empty() || fraction[0] == '-' || fraction.size() > 9) throw "a setting's default is not a number";
  long long scale = 1;
  for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
  const long long whole = point == 0 ? 0 : wholeNumber(t.substr(0, point));
  if (whole < 0) throw "a setting's default is negative";
  return {whole * scale + wholeNumber(fraction), static_cast<int>(fraction.size())};
}

constexpr long long integerIn(const Setting& s) {
  if (s.type != SettingType::kInteger) throw "the setting is not a whole number";
  const long long n = wholeNumber(s.default_text);
  if (n < s.min || n > s.max) throw "a setting's default is out of its range";
  return n;
}

constexpr std::chrono::milliseconds seconds(const Setting& s) {
  if (s.type != SettingType::kSeconds) throw "the setting is not a number of seconds";
  const Decimal d = decimal(s.default_text);
  long long scale = 1;
  for (int i = 0; i < d.places; ++i) scale *= 10;
  if ((d.digits * 1000) % scale != 0) throw "a setting's default is not a whole number of milliseconds";
  const long long ms = d.digits * 1000 / scale;
  if (ms < 0) throw "a setting's default is negative";
  if (ms > 30LL * 24 * 3600 * 1000) throw "a setting's default is over 30 days";
  return std::chrono::milliseconds(ms);
}

constexpr bool switchValue(const Setting& s) {
  if (s.type != SettingType::kSwitch) throw "the setting is not a switch";
  if (s.default_text != "0" && s.default_text != "1") throw "a switch's default is not 0 or 1";
  return s.default_text == "1";
}

constexpr double fraction(const Setting& s) {
  if (s.type != SettingType::kFraction) throw "the setting is not a share";
  const Decimal d = decimal(s.default_text);
  double scale = 1;
  for (int i = 0; i < d.places; ++i) scale *= 10;
  const double x = static_cast<double>(d.digits) / scale;
  if (!(x > 0 && x <= 1)) throw "a share's default is not in (0, 1]";
  return x;
}

constexpr bool isAuto(const Setting& s) { return s.accepts_auto && s.default_text == "auto"; }

}  // namespace setting_defaults

consteval long long integerDefault(const Setting& s) { return setting_defaults::integerIn(s); }
consteval std::chrono::milliseconds secondsDefault(const Setting& s) { return setting_defaults::seconds(s); }
consteval bool switchDefault(const Setting& s) { return setting_defaults::switchValue(s); }
consteval double fractionDefault(const Setting& s) { return setting_defaults::fraction(s); }

constexpr bool validSetting(const Setting& s) {
  if (s.name.empty() || s.help.empty() || s.group.empty()) throw "a setting needs a name, help and a group";
  if (!s.flag && s.env.empty()) throw "a setting needs a flag or an environment name";
  if (s.required && !s.default_text.empty()) throw "a required setting has no default";
  if (s.accepts_auto && s.type != SettingType::kInteger && s.type != SettingType::kSwitch)
    throw "only whole numbers and switches accept auto";
  if (s.type == SettingType::kInteger && s.min > s.max) throw "a setting's range is empty";
  if (s.required || setting_defaults::isAuto(s)) return true;
  switch (s.type) {
    case SettingType::kSeconds: setting_defaults::seconds(s); break;
    case SettingType::kInteger:
      // The requested ranks have no default: unset means the hostname, else the order of arrival.
      if (!s.default_text.empty()) setting_defaults::integerIn(s);
      break;
    case SettingType::kSwitch: setting_defaults::switchValue(s); break;
    case SettingType::kFraction: setting_defaults::fraction(s); break;
    case SettingType::kText: break;
    case SettingType::kChoice: {
      if (s.choices.empty() || s.noun.empty()) throw "a choice needs its words and a noun";
      bool found = false;
      for (std::string_view c : s.choices) found = found || c == s.default_text;
      if (!found) throw "a choice's default is not one of its words";
      break;
    }
  }
  return true;
}

}  // namespace zps
