// A folder, a FIFO, a missing or an unreadable file given as a data file (csv:, libsvm:, criteo:) or
// as ZPS_AUTH_TOKEN_FILE is a user error: the process exits 2 at once with one line naming the path.
// A FIFO is the dangerous one: opened for reading, it would wait for a writer forever.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

struct BadPath {
  std::string path;
  std::string says;  // what the refusal says after the path
};

// A folder, a FIFO and a missing file in `dir`, and an unreadable file where this process's rights let
// it make one (root reads every file: then it prints why that case is left out).
std::vector<BadPath> badPaths(const std::string& dir) {
  std::vector<BadPath> paths = {{dir + "/folder", " is a folder; give a regular file"},
                                {dir + "/fifo", " is a FIFO; give a regular file"},
                                {dir + "/missing.csv", " does not exist"}};
  REQUIRE(mkdir(paths[0].path.c_str(), 0700) == 0);
  REQUIRE(mkfifo(paths[1].path.c_str(), 0600) == 0);
  const std::string unreadable = dir + "/unreadable.csv";
  std::ofstream(unreadable) << "1,2,0\n";
  REQUIRE(chmod(unreadable.c_str(), 0) == 0);
  if (geteuid() != 0)
    paths.push_back({unreadable, " cannot be read: Permission denied"});
  else
    std::printf("bad paths: the unreadable-file case is left out: root reads a file of mode 000\n");
  return paths;
}

}  // namespace

TEST_CASE("bad paths: a folder, FIFO, missing or unreadable data file exits 2 at once, naming it") {
  Cluster scratch(1, 1);
  const std::vector<BadPath> paths = badPaths(scratch.dir());
  for (const BadPath& bad : paths) {
    for (const std::string format : {"csv:", "libsvm:", "criteo:"}) {
      Cluster c(1, 1);
      int s = c.startScheduler();
      c.startServer();
      const auto start = Clock::now();
      int w = c.startWorker(0, {"train", "--data", format + bad.path});
      INFO(format << bad.path << "\n" << c.logTail(w) << c.logTail(s));
      CHECK(c.waitExit(w, 20s) == 2);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::printf("bad paths: %s%s: exit 2 after %.2f s\n", format.c_str(), bad.path.c_str(), seconds);
      // Well under a second on an idle machine; the bound leaves room for a loaded CI host.
      CHECK(seconds < 5);
      CHECK(contains(c.log(w), "data file " + bad.path + bad.says));
      c.waitAll(30s);
    }
  }
}

TEST_CASE("bad paths: a folder, FIFO or missing ZPS_AUTH_TOKEN_FILE exits 2 at once in every role") {
  Cluster scratch(1, 1);
  const std::vector<BadPath> paths = badPaths(scratch.dir());
  for (const BadPath& bad : paths) {
    Cluster c(1, 1);
    c.setEnv("ZPS_AUTH_TOKEN_FILE", bad.path);
    const auto start = Clock::now();
    std::vector<int> roles = {c.startScheduler(), c.startServer(), c.startWorker(0, {"check", "--rounds", "1"})};
    for (int i : roles) {
      INFO(bad.path << "\n" << c.logTail(i));
      CHECK(c.waitExit(i, 20s) == 2);
      CHECK(contains(c.log(i), "ZPS_AUTH_TOKEN_FILE=" + bad.path + bad.says));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("bad paths: ZPS_AUTH_TOKEN_FILE=%s: 3 roles exited 2 after %.2f s\n", bad.path.c_str(), seconds);
    CHECK(seconds < 5);
  }
}
