// The zps binary's command line: its commands (commands()), each command's own flags and the parser
// that reads `zps COMMAND [FLAGS] [ARGS]`.
//
// A command's flags are declared with ZPS_FLAG next to the code that reads them:
//   ZPS_FLAG(train, int32_t, epochs, 10, "passes over the training data");
// defines `FLAGS_epochs` (private to that file) and registers it as a flag of `zps train`. Unlike
// gflags' flags, which are global to the binary, a flag belongs to its command: two commands may use
// one name with their own meaning and default (`zps train --model mlp`, `zps bench --model resnet50`),
// and a command refuses the flags of the others. Commands that run a node (the roles and the worker
// programs) also take every setting's flag (setting.h): `zps check --rendezvous_timeout 30`.
//
// Flags are registered during static initialisation and parsed once by main, before other threads
// start; nothing here is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zps/status.h"

namespace zps {

enum class FlagType { kString, kInt32, kInt64, kUInt64, kDouble, kBool };

struct CommandFlag {
  std::string command;  // "train"
  std::string name;     // "epochs" (the flag is --epochs)
  FlagType type;
  void* value;               // the FLAGS_ variable, of `type`
  std::string default_text;  // the value at registration, as users write it
  std::string help;
};

// Registers a command's flag; used by ZPS_FLAG.
class CommandFlagRegistrar {
 public:
  CommandFlagRegistrar(const char* command, const char* name, std::string* value, const char* help);
  CommandFlagRegistrar(const char* command, const char* name, int32_t* value, const char* help);
  CommandFlagRegistrar(const char* command, const char* name, int64_t* value, const char* help);
  CommandFlagRegistrar(const char* command, const char* name, uint64_t* value, const char* help);
  CommandFlagRegistrar(const char* command, const char* name, double* value, const char* help);
  CommandFlagRegistrar(const char* command, const char* name, bool* value, const char* help);
};

#define ZPS_FLAG(command, type, name, default_value, help) \
  static type FLAGS_##name = default_value;                \
  static const ::zps::CommandFlagRegistrar zps_flag_registrar_##name(#command, #name, &FLAGS_##name, help)

// The flags of `command`, in the order they were declared.
std::vector<const CommandFlag*> commandFlags(std::string_view command);
// Parses `text` into the flag's variable; an InvalidArgument names the flag.
Status setCommandFlag(const CommandFlag& flag, const std::string& text);

// One zps command, for the parser and for help.
struct CommandInfo {
  std::string name;     // "" for the bare `zps` (scheduler or server)
  std::string usage;    // the synopsis line(s)
  std::string summary;  // one line, for `zps help`
  // The settings (setting.h) it reads and takes as flags: {"*"} for all of them.
  std::vector<std::string> settings;
  bool own_parser = false;  // parses its own arguments (zps launch, zps trace)
};
const std::vector<CommandInfo>& commands();
const CommandInfo* findCommand(std::string_view name);
bool takesSetting(const CommandInfo& command, std::string_view setting);
std::string commandName(const CommandInfo& command);  // "zps train", or "zps" for the bare command

struct CommandLine {
  bool help = false;                    // -h or --help was given
  std::vector<std::string> positional;  // arguments that are not flags (and all after "--")
};
// Parses a command's arguments (after the command word): --name=value, --name value, a boolean
// --name or --noname, -h and --help. Values go to the command's flags and, for the settings it takes,
// to setFlagValue. An unknown flag or a bad value is an InvalidArgument that names it.
StatusOr<CommandLine> parseCommandLine(const CommandInfo& command, const std::vector<std::string>& args);

}  // namespace zps
