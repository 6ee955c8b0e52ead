#include "tools/launch_python.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "tools/process.h"

namespace zps {
namespace {

namespace fs = std::filesystem;

// Debian installs python3-torch for this interpreter only.
constexpr char kDebianPython[] = "/usr/bin/python3";
// Importing torch takes seconds; finding it does not. The working folder is left out of the search and
// a namespace package (a plain folder named torch, origin None) does not count: launched from a folder
// that holds a `torch` directory (examples/, a source checkout), an interpreter without torch would
// otherwise seem to have it.
constexpr char kFindTorch[] =
    "import importlib.util, os, sys; sys.path[:] = [p for p in sys.path if p not in ('', '.', os.getcwd())]; "
    "s = importlib.util.find_spec('torch'); sys.exit(0 if s is not None and s.origin is not None else 3)";
constexpr std::chrono::milliseconds kProbeDeadline{20000};

bool isFile(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool holdsZpsPackage(const fs::path& dir) { return isFile(dir / "zps" / "__init__.py"); }

std::string realPath(const fs::path& path) {
  std::error_code ec;
  fs::path real = fs::weakly_canonical(path, ec);
  return ec ? path.lexically_normal().string() : real.string();
}

// The executable `name` resolves to through PATH, as execvp would find it; empty if none.
std::string whichInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";  // an empty PATH entry means the working directory
    const std::string candidate = dir + "/" + name;
    if (isFile(candidate) && access(candidate.c_str(), X_OK) == 0) return candidate;
    if (colon == std::string_view::npos) return "";
    dirs.remove_prefix(colon + 1);
  }
}

// Whether `interpreter` finds the torch package (exit 0 of kFindTorch within the deadline).
bool findsTorch(const std::string& interpreter) {
  proc::SpawnOptions options;
  options.argv = {interpreter, "-c", kFindTorch};
  auto child = proc::Subprocess::spawn(options);
  if (!child.ok()) return false;
  // Drain its output (a warning at start-up must not block it on a full pipe).
  (void)proc::readUntilEof(child.value()->outputFd(), kProbeDeadline);
  auto code = child.value()->waitFor(std::chrono::milliseconds(1000));
  if (!code.ok()) {
    child.value()->terminate(std::chrono::milliseconds(500));
    return false;
  }
  return *code == 0;
}

bool isBarePython(const std::string& word) { return word == "python3" || word == "python"; }

}  // namespace

std::string findZpsPythonPackage(const std::string& self_exe) {
  const fs::path prefix = fs::path(self_exe).parent_path().parent_path();
  if (holdsZpsPackage(prefix / "python")) return realPath(prefix / "python");
  // An install: <prefix>/lib/python3.N/site-packages (CMake's and pip's layout), or Debian's
  // <prefix>/lib/python3/dist-packages.
  std::error_code ec;
  std::vector<fs::path> libs;
  for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("python3")) libs.push_back(entry.path());
  }
  std::sort(libs.begin(), libs.end());
  for (const auto& lib : libs) {
    for (const char* leaf : {"site-packages", "dist-packages"}) {
      if (holdsZpsPackage(lib / leaf)) return realPath(lib / leaf);
    }
  }
  return "";
}

std::string prependPythonPath(const std::string& package_dir, const std::string& current) {
  std::string result = package_dir;
  std::string_view rest = current;
  while (!rest.empty()) {
    const size_t colon = rest.find(':');
    const std::string_view entry = rest.substr(0, colon);
    if (!entry.empty() && entry != package_dir) result.append(":").append(entry);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return result;
}

PythonLaunch preparePythonLaunch(std::vector<std::string> command, const std::string& self_exe) {
  PythonLaunch out;
  const std::string package = findZpsPythonPackage(self_exe);
  if (!package.empty()) {
    const char* current = std::getenv("PYTHONPATH");
    out.python_path = prependPythonPath(package, current != nullptr ? current : "");
    out.notes.push_back("the zps Python package is in " + package + " (PYTHONPATH starts with it)");
  }
  if (!command.empty() && isBarePython(command[0])) {
    const std::string found = whichInPath(command[0]);
    const bool is_debian = !found.empty() && realPath(found) == realPath(kDebianPython);
    if (!is_debian && !findsTorch(found.empty() ? command[0] : found) && isFile(kDebianPython) &&
        findsTorch(kDebianPython)) {
      out.notes.push_back(command[0] +
                          (found.empty() ? " is not on PATH" : " on PATH (" + found + ") cannot import torch") +
                          "; workers run " + kDebianPython + " (Debian's, with python3-torch) instead");
      command[0] = kDebianPython;
    }
  }
  out.command = std::move(command);
  return out;
}

}  // namespace zps
