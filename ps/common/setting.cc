#include "ps/common/setting.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>

namespace zps {
namespace {

std::mutex g_flags_mu;
std::map<std::string, std::string>& flagValues() {
  static std::map<std::string, std::string> values;
  return values;
}

// `s`, which must be of one of the expected types: another type is a bug in the caller (our own code),
// not a user error.
const Setting& expectType(const Setting& s, std::initializer_list<SettingType> types) {
  CHECK(std::find(types.begin(), types.end(), s.type) != types.end())
      << "setting " << s.name << " is a " << settingTypeName(s.type);
  return s;
}

std::string joinChoices(const Words& choices) {
  std::string out;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += i + 1 == choices.size() ? " or " : ", ";
    out += choices[i];
  }
  return out;
}

// What a message asks the user to set `source` to.
std::string hintFor(const Setting& s, const std::string& source) {
  if (!s.hint.empty()) return std::string(s.hint);
  if (s.accepts_auto && s.type == SettingType::kSwitch) return "auto, 0 or 1";
  if (s.accepts_auto && s.type == SettingType::kInteger)
    return "auto or a whole number in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
  switch (s.type) {
    case SettingType::kSeconds: return "a number of seconds, e.g. " + source + "=30";
    case SettingType::kInteger:
      return "a whole number in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
    case SettingType::kSwitch: return "0 or 1";
    case SettingType::kChoice: return joinChoices(s.choices);
    case SettingType::kFraction:
    case SettingType::kText: return "";
  }
  return "";
}

// The text to parse: the flag or variable, else the default. A required setting has no default.
StatusOr<SettingText> textOrDefault(const EnvLookup& env, const Setting& s) {
  if (auto t = settingText(env, s)) return *t;
  if (s.required) {
    const std::string name = s.env.empty() ? "--" + std::string(s.name) : std::string(s.env.front());
    return InvalidArgument(name + " is not set; set it to " + hintFor(s, name));
  }
  return SettingText{"the default of " + std::string(s.name), std::string(s.default_text)};
}

}  // namespace

const char* settingTypeName(SettingType type) {
  switch (type) {
    case SettingType::kSeconds: return "seconds";
    case SettingType::kInteger: return "integer";
    case SettingType::kSwitch: return "0 or 1";
    case SettingType::kFraction: return "share in (0, 1]";
    case SettingType::kText: return "text";
    case SettingType::kChoice: return "choice";
  }
  return "unknown";
}

EnvLookup processEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

const Setting* findSetting(std::string_view name) {
  for (const Setting& s : settingsTable()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Status setFlagValue(const std::string& name, const std::string& text) {
  const Setting* s = findSetting(name);
  if (s == nullptr || !s->flag) return InvalidArgument("--" + name + " is not a setting's flag");
  std::lock_guard<std::mutex> lock(g_flags_mu);
  flagValues()[name] = text;
  return Status::OK();
}

std::optional<std::string> flagValue(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_flags_mu);
  auto it = flagValues().find(name);
  if (it == flagValues().end()) return std::nullopt;
  return it->second;
}

FlagValuesSaver::FlagValuesSaver() {
  std::lock_guard<std::mutex> lock(g_flags_mu);
  saved_ = flagValues();
}

FlagValuesSaver::~FlagValuesSaver() {
  std::lock_guard<std::mutex> lock(g_flags_mu);
  flagValues() = saved_;
}

std::optional<SettingText> settingText(const EnvLookup& env, const Setting& setting) {
  if (setting.flag) {
    if (auto v = flagValue(std::string(setting.name))) return SettingText{"--" + std::string(setting.name), *v};
  }
  for (std::string_view name : setting.env) {
    auto v = env(std::string(name));
    if (!v || (setting.blank_is_unset && trimSpace(*v).empty())) continue;
    return SettingText{std::string(name), *v};
  }
  return std::nullopt;
}

StatusOr<std::chrono::milliseconds> readSeconds(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kSeconds});
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  return parseSeconds(t.source, t.text, hintFor(s, t.source));
}

StatusOr<long long> readInteger(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kInteger});
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  return parseInteger(t.source, t.text, s.min, s.max, hintFor(s, t.source));
}

namespace {

bool isAuto(const Setting& s, const SettingText& t) { return s.accepts_auto && trimSpace(t.text) == "auto"; }

StatusOr<bool> parseSwitch(const Setting& s, const SettingText& t) {
  std::string text = trimSpace(t.text);
  // On the command line `--recovery` alone and `--recovery=true` mean 1, as gflags users expect.
  if (t.source.starts_with("--")) {
    if (text.empty() || text == "true") text = "1";
    if (text == "false") text = "0";
  }
  ZPS_ASSIGN_OR_RETURN(long long on, parseInteger(t.source, text, 0, 1, hintFor(s, t.source)));
  return on == 1;
}

}  // namespace

StatusOr<bool> readSwitch(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kSwitch});
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  return parseSwitch(s, t);
}

StatusOr<std::optional<long long>> readIntegerOrAuto(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kInteger});
  CHECK(s.accepts_auto) << "setting " << s.name << " does not accept auto";
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  if (isAuto(s, t)) return std::optional<long long>();
  ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(t.source, t.text, s.min, s.max, hintFor(s, t.source)));
  return std::optional<long long>(n);
}

StatusOr<std::optional<bool>> readSwitchOrAuto(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kSwitch});
  CHECK(s.accepts_auto) << "setting " << s.name << " does not accept auto";
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  if (isAuto(s, t)) return std::optional<bool>();
  ZPS_ASSIGN_OR_RETURN(bool on, parseSwitch(s, t));
  return std::optional<bool>(on);
}

StatusOr<double> readFraction(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kFraction});
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  return parseFraction(t.source, t.text);
}

StatusOr<std::string> readText(const EnvLookup& env, const Setting& setting) {
  const Setting& s = expectType(setting, {SettingType::kText, SettingType::kChoice});
  ZPS_ASSIGN_OR_RETURN(SettingText t, textOrDefault(env, s));
  std::string text = trimSpace(t.text);
  if (s.type == SettingType::kChoice && std::find(s.choices.begin(), s.choices.end(), text) == s.choices.end()) {
    return InvalidArgument(t.source + "='" + text + "' is not " + std::string(s.noun) + "; set it to " +
                           hintFor(s, t.source));
  }
  return text;
}

std::string trimSpace(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

StatusOr<long long> parseInteger(const std::string& name, const std::string& value, long long min, long long max,
                                 const std::string& hint) {
  std::string v = trimSpace(value);
  std::string fix = hint.empty() ? "" : "; set it to " + hint;
  if (v.empty()) return InvalidArgument(name + " is empty" + fix);
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (errno == ERANGE || end == v.c_str() || *end != '\0')
    return InvalidArgument(name + "='" + value + "' is not a whole number" + fix);
  if (n < min || n > max)
    return InvalidArgument(name + "=" + v + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) +
                           "]" + fix);
  return n;
}

StatusOr<double> parseFraction(const std::string& name, const std::string& value) {
  std::string v = trimSpace(value);
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !(x > 0 && x <= 1))
    return InvalidArgument(name + "='" + value + "' is not a share in (0, 1]; set it to e.g. 0.01 (1%)");
  return x;
}

StatusOr<std::chrono::milliseconds> parseSeconds(const std::string& name, const std::string& value,
                                                 const std::string& hint) {
  std::string v = trimSpace(value);
  std::string fix = hint.empty() ? "" : "; set it to " + hint;
  errno = 0;
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !std::isfinite(s))
    return InvalidArgument(name + "='" + value + "' is not a number of seconds" + fix);
  if (s < 0 || s > 30 * 24 * 3600.0 || (s > 0 && s < 0.001))
    return InvalidArgument(name + "=" + v + " is out of range: use 0 or 0.001 to 2592000 seconds" + fix);
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

}  // namespace zps
