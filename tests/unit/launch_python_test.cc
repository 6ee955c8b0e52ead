// zps launch's choice of interpreter for `python3 script.py` workers (tools/launch_python.h): a folder
// named torch in the working folder does not make an interpreter without torch seem to have it.
#include "tools/launch_python.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace zps {
namespace {

namespace fs = std::filesystem;

bool debianPythonHasTorch() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }

TEST_CASE("launch python: a torch folder in the working folder does not count as torch", "[launch]") {
  if (!debianPythonHasTorch()) {
    std::printf("SKIPPED: /usr/bin/python3 cannot import torch (install python3-torch)\n");
    return;
  }
  const fs::path dir = fs::temp_directory_path() / ("zps-launch-python-" + std::to_string(getpid()));
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "work" / "torch");  // like examples/torch in a checkout
  // An interpreter on PATH without torch: Debian's, without its site packages.
  const fs::path wrapper = dir / "bin" / "python3";
  std::ofstream(wrapper) << "#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string old_path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  const fs::path old_cwd = fs::current_path();
  setenv("PATH", ((dir / "bin").string() + ":" + old_path).c_str(), 1);
  fs::current_path(dir / "work");
  PythonLaunch launch = preparePythonLaunch({"python3", "train.py"}, "/nonexistent/bin/zps");
  fs::current_path(old_cwd);
  setenv("PATH", old_path.c_str(), 1);
  fs::remove_all(dir);
  REQUIRE(launch.command.size() == 2);
  CHECK(launch.command[0] == "/usr/bin/python3");
  CHECK(launch.command[1] == "train.py");
}

}  // namespace
}  // namespace zps
