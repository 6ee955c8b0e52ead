#include "tools/command_line.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <sstream>

#include "ps/common/setting.h"

namespace zps {
namespace {

std::deque<CommandFlag>& registry() {
  static std::deque<CommandFlag> flags;  // a deque: registered flags never move
  return flags;
}

void add(const char* command, const char* name, FlagType type, void* value, std::string default_text,
         const char* help) {
  registry().push_back(CommandFlag{command, name, type, value, std::move(default_text), help});
}

std::string doubleText(double v) {
  std::ostringstream text;
  text << v;
  return text.str();
}

const CommandFlag* findFlag(std::string_view command, std::string_view name) {
  for (const CommandFlag& f : registry()) {
    if (f.command == command && f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, std::string* value,
                                           const char* help) {
  add(command, name, FlagType::kString, value, *value, help);
}
CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, int32_t* value, const char* help) {
  add(command, name, FlagType::kInt32, value, std::to_string(*value), help);
}
CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, int64_t* value, const char* help) {
  add(command, name, FlagType::kInt64, value, std::to_string(*value), help);
}
CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, uint64_t* value, const char* help) {
  add(command, name, FlagType::kUInt64, value, std::to_string(*value), help);
}
CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, double* value, const char* help) {
  add(command, name, FlagType::kDouble, value, doubleText(*value), help);
}
CommandFlagRegistrar::CommandFlagRegistrar(const char* command, const char* name, bool* value, const char* help) {
  add(command, name, FlagType::kBool, value, *value ? "true" : "false", help);
}

std::vector<const CommandFlag*> commandFlags(std::string_view command) {
  std::vector<const CommandFlag*> out;
  for (const CommandFlag& f : registry()) {
    if (f.command == command) out.push_back(&f);
  }
  return out;
}

Status setCommandFlag(const CommandFlag& flag, const std::string& text) {
  const std::string name = "--" + flag.name;
  switch (flag.type) {
    case FlagType::kString: *static_cast<std::string*>(flag.value) = text; return Status::OK();
    case FlagType::kInt32: {
      ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, text, INT32_MIN, INT32_MAX, "a whole number"));
      *static_cast<int32_t*>(flag.value) = static_cast<int32_t>(n);
      return Status::OK();
    }
    case FlagType::kInt64: {
      ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, text, LLONG_MIN, LLONG_MAX, "a whole number"));
      *static_cast<int64_t*>(flag.value) = n;
      return Status::OK();
    }
    case FlagType::kUInt64: {
      ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, text, 0, LLONG_MAX, "a whole number from 0"));
      *static_cast<uint64_t*>(flag.value) = static_cast<uint64_t>(n);
      return Status::OK();
    }
    case FlagType::kDouble: {
      std::string v = trimSpace(text);
      errno = 0;
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !std::isfinite(x))
        return InvalidArgument(name + "='" + text + "' is not a number");
      *static_cast<double*>(flag.value) = x;
      return Status::OK();
    }
    case FlagType::kBool: {
      std::string v = trimSpace(text);
      if (v == "true" || v == "1") {
        *static_cast<bool*>(flag.value) = true;
      } else if (v == "false" || v == "0") {
        *static_cast<bool*>(flag.value) = false;
      } else {
        return InvalidArgument(name + "='" + text + "' is not true or false");
      }
      return Status::OK();
    }
  }
  return InvalidArgument(name + " has an unknown type");
}

const std::vector<CommandInfo>& commands() {
  static const std::vector<CommandInfo> list = {
      {"",
       "DMLC_ROLE=scheduler zps [FLAGS]\nDMLC_ROLE=server zps [FLAGS]",
       "run the scheduler or a server, as DMLC_ROLE says",
       {"*"}},
      {"check",
       "DMLC_ROLE=worker zps check [FLAGS]",
       "push and pull exact-arithmetic tensors for N rounds and check every sum",
       {"*"}},
      {"bench",
       "DMLC_ROLE=worker zps bench [FLAGS]",
       "push-pull latency and goodput table, per tensor size or for a model's tensors",
       {"*"}},
      {"train",
       "DMLC_ROLE=worker zps train [FLAGS]",
       "train a model (linear, mlp, ctr) on a dataset across the job's workers",
       {"*"}},
      {"launch",
       "zps launch --servers S --workers W [--local-size N] [FLAGS] -- CMD ARGS...",
       "run a whole job (scheduler, servers, workers) on this machine",
       {},
       true},
      {"probe",
       "zps probe [--host H] [--port P]",
       "exit 0 if the scheduler accepts connections (for readiness probes)",
       {"root_uri", "root_port"}},
      {"status",
       "zps status [--host H] [--metrics_port P] [--status_json]",
       "the scheduler's table of nodes; exit 1 if one is missing or dead",
       {"metrics_port", "root_uri", "auth_token", "auth_token_file"}},
      {"trace",
       "zps trace merge OUT.json IN.json [IN.json...]",
       "merge ZPS_TRACE_ON timeline files into one trace",
       {},
       true},
      {"version", "zps version [--gpu]", "the version; --gpu: the build's CUDA, the driver and each GPU", {}},
      {"help",
       "zps help [COMMAND | env [--markdown]]",
       "this overview, a command's flags and environment, or every setting",
       {},
       true},
  };
  return list;
}

const CommandInfo* findCommand(std::string_view name) {
  for (const CommandInfo& c : commands()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string commandName(const CommandInfo& command) { return command.name.empty() ? "zps" : "zps " + command.name; }

bool takesSetting(const CommandInfo& command, std::string_view setting) {
  for (const std::string& s : command.settings) {
    if (s == "*" || s == setting) return true;
  }
  return false;
}

StatusOr<CommandLine> parseCommandLine(const CommandInfo& command, const std::vector<std::string>& args) {
  CommandLine out;
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") out.help = true;
  }
  if (out.help) return out;  // help wins over any mistake in the other arguments
  const std::string see = "; zps help" + (command.name.empty() ? "" : " " + command.name) + " lists the flags";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.positional.insert(out.positional.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      out.positional.push_back(arg);
      continue;
    }
    if (!arg.starts_with("--")) return InvalidArgument("unknown flag " + arg + " (flags start with --)" + see);
    const size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> value;
    if (eq != std::string::npos) value = arg.substr(eq + 1);

    const CommandFlag* flag = findFlag(command.name, name);
    const Setting* setting = flag == nullptr ? findSetting(name) : nullptr;
    if (setting != nullptr && (!setting->flag || !takesSetting(command, name))) setting = nullptr;
    bool boolean = (flag != nullptr && flag->type == FlagType::kBool) ||
                   (setting != nullptr && setting->type == SettingType::kSwitch);
    if (flag == nullptr && setting == nullptr && name.starts_with("no") && !value) {
      // --noname turns a boolean flag off, as with gflags.
      const std::string positive = name.substr(2);
      const CommandFlag* f = findFlag(command.name, positive);
      const Setting* s = f == nullptr ? findSetting(positive) : nullptr;
      if (s != nullptr && (!s->flag || s->type != SettingType::kSwitch || !takesSetting(command, positive)))
        s = nullptr;
      if ((f != nullptr && f->type == FlagType::kBool) || s != nullptr) {
        flag = f;
        setting = s;
        name = positive;
        value = "0";
      }
    }
    if (flag == nullptr && setting == nullptr) return InvalidArgument("unknown flag --" + name + see);
    if (!value) {
      if (boolean) {
        value = "1";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return InvalidArgument("--" + name + " needs a value, e.g. --" + name + "=VALUE");
      }
    }
    if (flag != nullptr) {
      ZPS_RETURN_IF_ERROR(setCommandFlag(*flag, *value));
    } else {
      ZPS_RETURN_IF_ERROR(setFlagValue(name, *value));
    }
  }
  return out;
}

}  // namespace zps
