// `zps help`: the overview of the commands, one command's flags and environment, every setting
// (`zps help env`) and the configuration reference docs/configuration.md (`zps help env --markdown`).
// All of it is printed from the tables (settingsTable, commands, the commands' ZPS_FLAGs); the logging
// library's flags are never shown.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "tools/command_line.h"

namespace zps {

void printOverview(std::ostream& out);
void printCommandHelp(std::ostream& out, const CommandInfo& command);
void printSettings(std::ostream& out);
void printConfigurationMarkdown(std::ostream& out);

// `zps help ARGS...`: exit 0, or 2 with one line on stderr for an unknown command.
int helpMain(const std::vector<std::string>& args);

}  // namespace zps
