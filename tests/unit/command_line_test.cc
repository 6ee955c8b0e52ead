// Tests for the command-line parser and the commands' own flags (tools/command_line.h): values by
// type, booleans, unknown flags and bad values refused with a message that names them, help, the
// settings' flags only for the commands that take them, and flags private to their command.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ps/common/setting.h"
#include "tools/command_line.h"

ZPS_FLAG(parsertest, int32_t, rounds, 10, "rounds");
ZPS_FLAG(parsertest, bool, fast, false, "go fast");
ZPS_FLAG(parsertest, std::string, model, "mlp", "a model");
ZPS_FLAG(parsertest, double, rate, 0.5, "a rate");
ZPS_FLAG(parsertest, uint64_t, seed, 1, "a seed");
ZPS_FLAG(othertest, std::string, kind, "", "another command's flag");

namespace zps {
namespace {

const CommandInfo kTest{"parsertest", "zps parsertest [FLAGS]", "a test command", {}};
const CommandInfo kTestWithSettings{"parsertest", "zps parsertest [FLAGS]", "a test command", {"*"}};

// Parses and requires success; flags are reset to their defaults first.
CommandLine parse(const CommandInfo& command, const std::vector<std::string>& args) {
  FLAGS_rounds = 10;
  FLAGS_fast = false;
  FLAGS_model = "mlp";
  FLAGS_rate = 0.5;
  FLAGS_seed = 1;
  auto line = parseCommandLine(command, args);
  INFO((line.ok() ? "" : line.status().message()));
  REQUIRE(line.ok());
  return *line;
}

std::string error(const CommandInfo& command, const std::vector<std::string>& args) {
  auto line = parseCommandLine(command, args);
  REQUIRE_FALSE(line.ok());
  CHECK(line.status().code() == StatusCode::kInvalidArgument);
  return line.status().message();
}

TEST_CASE("command line: values of each type, in both spellings", "[command_line]") {
  CommandLine line = parse(kTest, {"--rounds", "5", "--fast", "--model=ctr", "--rate=0.25", "--seed", "7", "pos"});
  CHECK(FLAGS_rounds == 5);
  CHECK(FLAGS_fast);
  CHECK(FLAGS_model == "ctr");
  CHECK(FLAGS_rate == 0.25);
  CHECK(FLAGS_seed == 7);
  CHECK(line.positional == std::vector<std::string>{"pos"});
  CHECK_FALSE(line.help);
  parse(kTest, {"--fast=false"});
  CHECK_FALSE(FLAGS_fast);
  parse(kTest, {"--fast", "--nofast"});
  CHECK_FALSE(FLAGS_fast);
  // Everything after "--" is an argument.
  line = parse(kTest, {"--", "--rounds", "3"});
  CHECK(FLAGS_rounds == 10);
  CHECK(line.positional == std::vector<std::string>{"--rounds", "3"});
}

TEST_CASE("command line: unknown flags and bad values are refused by name", "[command_line]") {
  CHECK(error(kTest, {"--epochs", "3"}) == "unknown flag --epochs; zps help parsertest lists the flags");
  // Another command's flag is not this command's.
  CHECK_THAT(error(kTest, {"--kind=x"}), Catch::StartsWith("unknown flag --kind;"));
  CHECK_THAT(error(kTest, {"-rounds", "3"}), Catch::StartsWith("unknown flag -rounds (flags start with --)"));
  CHECK(error(kTest, {"--rounds", "many"}) == "--rounds='many' is not a whole number; set it to a whole number");
  CHECK_THAT(error(kTest, {"--rounds=99999999999"}), Catch::StartsWith("--rounds=99999999999 is out of range"));
  CHECK(error(kTest, {"--rate", "fast"}) == "--rate='fast' is not a number");
  CHECK(error(kTest, {"--rate", "inf"}) == "--rate='inf' is not a number");
  CHECK_THAT(error(kTest, {"--seed", "-1"}), Catch::StartsWith("--seed=-1 is out of range"));
  CHECK(error(kTest, {"--fast=maybe"}) == "--fast='maybe' is not true or false");
  CHECK(error(kTest, {"--rounds"}) == "--rounds needs a value, e.g. --rounds=VALUE");
  CHECK_THAT(error(kTest, {"--nomodel"}), Catch::StartsWith("unknown flag --nomodel"));
}

TEST_CASE("command line: -h and --help win over mistakes", "[command_line]") {
  CHECK(parse(kTest, {"-h"}).help);
  CHECK(parse(kTest, {"--rounds", "x", "--help"}).help);
  CHECK(parse(kTest, {"--no-such-flag", "-h"}).help);
  CHECK_FALSE(parse(kTest, {"--", "-h"}).help);
}

TEST_CASE("command line: settings' flags for the commands that take them", "[command_line]") {
  FlagValuesSaver restore;
  parse(kTestWithSettings, {"--rendezvous_timeout", "30", "--recovery", "--rounds=2"});
  CHECK(FLAGS_rounds == 2);
  CHECK(flagValue("rendezvous_timeout") == "30");
  CHECK(flagValue("recovery") == "1");
  parse(kTestWithSettings, {"--norecovery"});
  CHECK(flagValue("recovery") == "0");
  // Environment-only settings (secrets) are never flags; a command without settings takes none.
  CHECK_THAT(error(kTestWithSettings, {"--auth_token=x"}), Catch::StartsWith("unknown flag --auth_token"));
  CHECK_THAT(error(kTest, {"--rendezvous_timeout=3"}), Catch::StartsWith("unknown flag --rendezvous_timeout"));
}

TEST_CASE("command line: each command's flags and defaults are its own", "[command_line]") {
  auto flags = commandFlags("parsertest");
  REQUIRE(flags.size() == 5);
  CHECK(flags[0]->name == "rounds");
  CHECK(flags[0]->default_text == "10");
  CHECK(flags[1]->default_text == "false");
  CHECK(flags[2]->default_text == "mlp");
  CHECK(flags[3]->default_text == "0.5");
  REQUIRE(commandFlags("othertest").size() == 1);
  CHECK(commandFlags("no-such-command").empty());
  CHECK(findCommand("train") != nullptr);
  CHECK(findCommand("") != nullptr);
  CHECK(findCommand("no-such-command") == nullptr);
  CHECK(takesSetting(*findCommand("train"), "rendezvous_timeout"));
  CHECK(takesSetting(*findCommand("status"), "metrics_port"));
  CHECK_FALSE(takesSetting(*findCommand("status"), "rendezvous_timeout"));
}

}  // namespace
}  // namespace zps
