// Tests for `zps launch`'s command line (tools/launch_args.h): the required flags, both value forms,
// range checks that name the flag and the value, the worker command after '--', and the local size.
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tools/launch_args.h"

namespace zps {
namespace {

StatusOr<LaunchConfig> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "launch");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  return parseLaunchArgs(static_cast<int>(argv.size()), argv.data());
}

std::string error(std::vector<std::string> args) {
  auto config = parse(std::move(args));
  REQUIRE_FALSE(config.ok());
  CHECK(config.status().code() == StatusCode::kInvalidArgument);
  return config.status().message();
}

TEST_CASE("launch args: a whole command line, both value forms", "[launch]") {
  auto config = parse({"--servers", "2", "--workers=3", "--host", "10.0.0.1", "--port=9000", "--timeout", "1.5",
                       "--progress=0", "--local-size", "4", "--", "train", "--epochs", "2"});
  REQUIRE(config.ok());
  CHECK(config->servers == 2);
  CHECK(config->workers == 3);
  CHECK(config->host == "10.0.0.1");
  CHECK(config->port == 9000);
  CHECK(config->timeout_s == 1.5);
  CHECK(config->progress_s == 0);
  CHECK(config->local_size == 4);
  CHECK(config->command == std::vector<std::string>{"train", "--epochs", "2"});
  CHECK_FALSE(config->help);
}

TEST_CASE("launch args: defaults, and flags after '--' belong to the worker command", "[launch]") {
  auto config = parse({"--servers=1", "--workers=1", "--", "python3", "--servers", "9"});
  REQUIRE(config.ok());
  CHECK(config->host == "127.0.0.1");
  CHECK(config->port == 0);
  CHECK(config->timeout_s == 0);
  CHECK(config->progress_s == -1);
  CHECK(config->local_size == 0);
  CHECK(config->servers == 1);
  CHECK(config->command == std::vector<std::string>{"python3", "--servers", "9"});
}

TEST_CASE("launch args: help is answered before the arguments after it are read", "[launch]") {
  for (const char* flag : {"-h", "--help"}) {
    auto config = parse({flag, "--servers", "0"});
    REQUIRE(config.ok());
    CHECK(config->help);
  }
  CHECK(error({"--servers", "0", "-h"}) == "--servers must be an integer from 1 to 1000, got '0'");
}

TEST_CASE("launch args: missing pieces are named", "[launch]") {
  CHECK(error({"--workers=1", "--", "train"}) == "--servers S is required");
  CHECK(error({"--servers=1", "--", "train"}) == "--workers W is required");
  CHECK(error({"--servers=1", "--workers=1", "train"}) == "unexpected 'train': the worker command goes after '--'");
  CHECK(error({"--servers=1", "--workers=1"}) == "missing '--' before the worker command");
  CHECK(error({"--servers=1", "--workers=1", "--"}) == "missing the worker command after '--'");
  CHECK(error({"--servers"}) == "--servers needs a value");
  CHECK(error({"--bogus", "1"}) == "unknown option '--bogus'");
  CHECK(error({"--bogus=1"}) == "unknown option '--bogus'");
}

TEST_CASE("launch args: out-of-range and malformed values name the flag and the value", "[launch]") {
  CHECK(error({"--servers=0", "--workers=1", "--", "train"}) == "--servers must be an integer from 1 to 1000, got '0'");
  CHECK(error({"--servers=1", "--workers=1001", "--", "train"}) ==
        "--workers must be an integer from 1 to 1000, got '1001'");
  CHECK(error({"--servers=2x", "--workers=1", "--", "train"}) ==
        "--servers must be an integer from 1 to 1000, got '2x'");
  CHECK(error({"--local-size=65"}) == "--local-size must be an integer from 1 to 64, got '65'");
  CHECK(error({"--port=70000"}) == "--port must be an integer from 1 to 65535, got '70000'");
  CHECK(error({"--host="}) == "--host must not be empty");
  CHECK(error({"--timeout=0"}) == "--timeout must be a positive number of seconds, got '0'");
  CHECK(error({"--timeout=nan"}) == "--timeout must be a positive number of seconds, got 'nan'");
  CHECK(error({"--progress=-1"}) == "--progress must be a number of seconds (0: off), got '-1'");
}

TEST_CASE("launch args: local size from the flag, else NVIDIA_VISIBLE_DEVICES", "[launch]") {
  const char* saved = std::getenv("NVIDIA_VISIBLE_DEVICES");
  const std::string restore = saved != nullptr ? saved : "";
  LaunchConfig config;
  config.local_size = 3;
  setenv("NVIDIA_VISIBLE_DEVICES", "0,1", 1);
  CHECK(launchLocalSize(config) == 3);
  config.local_size = 0;
  CHECK(launchLocalSize(config) == 2);
  setenv("NVIDIA_VISIBLE_DEVICES", "GPU-a,GPU-b,GPU-c", 1);
  CHECK(launchLocalSize(config) == 3);
  for (const char* says_nothing : {"all", "none", "void", ""}) {
    setenv("NVIDIA_VISIBLE_DEVICES", says_nothing, 1);
    CHECK(launchLocalSize(config) == 1);
  }
  unsetenv("NVIDIA_VISIBLE_DEVICES");
  CHECK(launchLocalSize(config) == 1);
  if (saved != nullptr) setenv("NVIDIA_VISIBLE_DEVICES", restore.c_str(), 1);
}

}  // namespace
}  // namespace zps
