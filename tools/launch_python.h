// How `zps launch` readies a worker command that runs Python (a PyTorch script): the children find
// zps's Python package without a PYTHONPATH from the user, and a bare `python3` becomes an
// interpreter that can import torch when the one first on PATH cannot.
#pragma once

#include <string>
#include <vector>

namespace zps {

struct PythonLaunch {
  std::vector<std::string> command;  // the worker command, its interpreter perhaps replaced
  std::string python_path;           // PYTHONPATH for the children; empty: leave it as it is
  std::vector<std::string> notes;    // lines for launch to print (what it changed and why)
};

// The folder holding the `zps` Python package that belongs to the binary at `self_exe`: the build
// tree's <bin>/../python, else an installed <bin>/../lib/python3*/{site,dist}-packages, else
// <bin>/../lib/python3/dist-packages. Empty when none holds zps/__init__.py.
std::string findZpsPythonPackage(const std::string& self_exe);

// The PYTHONPATH that puts `package_dir` first and keeps `current` after it (no duplicate entry).
std::string prependPythonPath(const std::string& package_dir, const std::string& current);

// Readies `command` (the part after launch's `--`) for Python workers:
//  - PYTHONPATH gets zps's package folder (findZpsPythonPackage) in front, whatever the command,
//    since a shell script that runs python3 needs it too;
//  - when command[0] is a bare `python3` or `python` (no '/') whose PATH interpreter cannot find
//    torch and /usr/bin/python3 (Debian's, where python3-torch installs) can, command[0] becomes
//    /usr/bin/python3 and a note says so. An interpreter given by path is never replaced.
// Runs each interpreter once (importlib's find_spec, no import; 20 s deadline). Never fails:
// without a package or a torch, the command runs unchanged and Python's own error says why.
PythonLaunch preparePythonLaunch(std::vector<std::string> command, const std::string& self_exe);

}  // namespace zps
