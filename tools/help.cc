#include "tools/help.h"

#include <iostream>

#include "ps/common/setting.h"
#include "tools/launch.h"

namespace zps {
namespace {

constexpr size_t kHelpColumn = 30;

// "  left   right", with right starting at kHelpColumn (on the next line when left is longer).
void row(std::ostream& out, const std::string& left, const std::string& right) {
  out << "  " << left;
  if (left.size() + 3 > kHelpColumn) {
    out << "\n" << std::string(kHelpColumn, ' ');
  } else {
    out << std::string(kHelpColumn - 2 - left.size(), ' ');
  }
  out << right << "\n";
}

std::string join(const Words& words, const std::string& sep, const std::string& last_sep, const std::string& quote) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? last_sep : sep;
    out += quote + std::string(words[i]) + quote;
  }
  return out;
}

// What values a setting takes, e.g. "seconds (0 or 0.001 to 2592000)".
std::string valueText(const Setting& s, const std::string& quote) {
  if (s.accepts_auto) {
    const std::string auto_word = quote + "auto" + quote;
    if (s.type == SettingType::kSwitch) return auto_word + ", " + quote + "0" + quote + " or " + quote + "1" + quote;
    if (s.type == SettingType::kInteger)
      return auto_word + " or a whole number in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
  }
  switch (s.type) {
    case SettingType::kSeconds: return "seconds (0 or 0.001 to 2592000)";
    case SettingType::kInteger: return "whole number in [" + std::to_string(s.min) + ", " + std::to_string(s.max) + "]";
    case SettingType::kSwitch: return quote + "0" + quote + " or " + quote + "1" + quote;
    case SettingType::kFraction: return "share in (0, 1]";
    case SettingType::kText: return "text";
    case SettingType::kChoice: return join(s.choices, ", ", " or ", quote);
  }
  return "";
}

std::string defaultText(const Setting& s) {
  if (s.required) return "required";
  if (s.default_text.empty()) return "empty";
  return std::string(s.default_text);
}

std::string flagTypeText(FlagType type) {
  switch (type) {
    case FlagType::kString: return "text";
    case FlagType::kInt32:
    case FlagType::kInt64: return "whole number";
    case FlagType::kUInt64: return "whole number from 0";
    case FlagType::kDouble: return "number";
    case FlagType::kBool: return "true or false";
  }
  return "";
}

// Markdown table cells: no pipes, and angle brackets shown as text.
std::string cell(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '<')
      out += "&lt;";
    else if (ch == '>')
      out += "&gt;";
    else
      out += ch;
  }
  return out;
}

std::vector<std::string> groups() {
  std::vector<std::string> out;
  for (const Setting& s : settingsTable()) {
    if (out.empty() || out.back() != s.group) out.emplace_back(s.group);
  }
  return out;
}

constexpr const char* kHelpParagraph =
    "`zps help` lists the commands. `zps help COMMAND`, `zps COMMAND --help` and `zps COMMAND -h` print\n"
    "that command's usage, its own flags and the environment it reads, and exit 0; `zps help env` prints\n"
    "every setting on this page. An unknown command exits 2 with one line that says so.\n";

constexpr const char* kReadOrder =
    "A flag on the command line wins (`--rendezvous_timeout 30` or `--rendezvous_timeout=30`); else the\n"
    "first of the setting's environment variables that is set (so `ZPS_HEARTBEAT_INTERVAL` wins over\n"
    "ps-lite's `PS_HEARTBEAT_INTERVAL`); else its default. An empty variable counts as not set, except\n"
    "where the value column says \"empty: an error\". A bad value stops the process with exit code 2 and\n"
    "one line that names the variable or flag and says what to set it to.\n";

}  // namespace

void printOverview(std::ostream& out) {
  out << "zps: a parameter-server training runtime\n\n"
         "usage: zps COMMAND [FLAGS] [ARGS]   (zps help COMMAND: its flags and environment)\n\n"
         "commands:\n";
  for (const CommandInfo& c : commands()) row(out, c.name.empty() ? "(none)" : c.name, c.summary);
  out << "\nSettings come from the environment (DMLC_*, PS_*, BYTEPS_*, ZPS_*) or from flags of the same\n"
         "name (ZPS_RENDEZVOUS_TIMEOUT = --rendezvous_timeout); zps help env lists them.\n"
         "Exit codes: 0 success, 1 job failure, 2 user error (bad environment, flag or argument).\n";
}

void printCommandHelp(std::ostream& out, const CommandInfo& command) {
  out << "usage: " << command.usage << "\n\n" << command.summary << "\n";
  auto flags = commandFlags(command.name);
  if (!flags.empty()) {
    out << "\nflags:\n";
    for (const CommandFlag* f : flags) {
      std::string left = "--" + f->name + (f->type == FlagType::kBool ? "" : "=" + f->default_text);
      row(out, left, f->help + (f->type == FlagType::kBool ? " (default " + f->default_text + ")" : ""));
    }
  }
  bool all = takesSetting(command, "*");
  if (all) {
    out << "\nsettings:\n  every setting of zps help env, from its environment variable (DMLC_*, ZPS_*) or\n"
           "  its flag (--rendezvous_timeout 30); a flag wins.\n";
  } else if (!command.settings.empty()) {
    out << "\nenvironment:\n";
    for (const std::string& name : command.settings) {
      const Setting* s = findSetting(name);
      if (s == nullptr) continue;
      std::string left = join(s->env, ", ", ", ", "");
      if (s->flag) left += " (--" + std::string(s->name) + ")";
      row(out, left, std::string(s->help));
    }
  }
}

void printSettings(std::ostream& out) {
  out << "Settings: a flag on the command line wins over the environment; of several variables the first\n"
         "one set wins; else the default. A bad value exits 2 with a line that says what to change.\n";
  for (const std::string& group : groups()) {
    out << "\n" << group << ":\n";
    for (const Setting& s : settingsTable()) {
      if (s.group != group) continue;
      std::string left = join(s.env, ", ", ", ", "");
      if (s.flag) left += "  --" + std::string(s.name);
      out << "  " << left << "\n      " << valueText(s, "") << ", " << (s.required ? "" : "default ") << defaultText(s)
          << ": " << s.help << "\n";
    }
  }
}

void printConfigurationMarkdown(std::ostream& out) {
  out << "# Configuration\n\n## Help\n\n"
      << kHelpParagraph
      << "\nThis page is generated by `zps help env --markdown` from the table of settings\n"
         "(`ps/common/settings.h`) and the commands' flags; regenerate it with\n"
         "`cmake --build build --target configuration-docs` (a test fails when the two differ).\n"
      << "\n## How a setting is read\n\n"
      << kReadOrder << "\n## Settings\n";
  for (const std::string& group : groups()) {
    out << "\n### " << group << "\n\n| Environment | Flag | Value | Default | Description |\n"
        << "|---|---|---|---|---|\n";
    for (const Setting& s : settingsTable()) {
      if (s.group != group) continue;
      std::string value = valueText(s, "`") + (s.blank_is_unset ? "" : " (empty: an error)");
      out << "| " << join(s.env, ", ", ", ", "`") << " | " << (s.flag ? "`--" + std::string(s.name) + "`" : "") << " | "
          << cell(value) << " | " << (s.required || s.default_text.empty() ? "" : "`") << cell(defaultText(s))
          << (s.required || s.default_text.empty() ? "" : "`") << " | " << cell(std::string(s.help)) << " |\n";
    }
  }
  out << "\n## Command flags\n\nEach command has its own flags; `zps help COMMAND` prints them.\n";
  for (const CommandInfo& c : commands()) {
    auto flags = commandFlags(c.name);
    if (flags.empty()) continue;
    out << "\n### " << commandName(c) << "\n\n`" << c.usage << "`: " << c.summary << "."
        << (takesSetting(c, "*") ? " Takes every setting's flag too." : "") << "\n\n"
        << "| Flag | Value | Default | Description |\n|---|---|---|---|\n";
    for (const CommandFlag* f : flags) {
      out << "| `--" << f->name << "` | " << flagTypeText(f->type) << " | "
          << (f->default_text.empty() ? "" : "`" + cell(f->default_text) + "`") << " | " << cell(f->help) << " |\n";
    }
  }
}

int helpMain(const std::vector<std::string>& args) {
  if (args.empty()) {
    printOverview(std::cout);
    return 0;
  }
  if (args[0] == "env") {
    if (args.size() == 2 && args[1] == "--markdown") {
      printConfigurationMarkdown(std::cout);
      return 0;
    }
    if (args.size() == 1) {
      printSettings(std::cout);
      return 0;
    }
    std::cerr << "zps help: usage: zps help env [--markdown]" << std::endl;
    return 2;
  }
  const CommandInfo* command = findCommand(args[0]);
  if (command == nullptr) {
    std::cerr << "zps help: unknown command '" << args[0] << "'; zps help lists the commands" << std::endl;
    return 2;
  }
  if (args.size() > 1) {
    std::cerr << "zps help: one command at a time: zps help " << args[0] << std::endl;
    return 2;
  }
  if (command->name == "launch") {
    char launch[] = "launch", help[] = "--help";
    char* argv[] = {launch, help, nullptr};
    return launchMain(2, argv);
  }
  printCommandHelp(std::cout, *command);
  return 0;
}

}  // namespace zps
