// Every zps process raises its open-file soft limit to the hard limit at start: a connection per peer
// would otherwise cap a job at the soft limit (often 1024) of connections.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using namespace std::chrono_literals;

namespace {

// The "Max open files" soft and hard limits of a process, from /proc/<pid>/limits.
std::pair<std::string, std::string> openFileLimits(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  std::smatch m;
  std::regex re("^Max open files\\s+(\\S+)\\s+(\\S+)");
  while (std::getline(in, line))
    if (std::regex_search(line, m, re)) return {m[1], m[2]};
  return {"", ""};
}

}  // namespace

TEST_CASE("open files: a node raises its soft limit to the hard limit") {
  rlimit original{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &original) == 0);
  if (original.rlim_max != RLIM_INFINITY && original.rlim_max <= 256) {
    WARN("SKIPPED: the hard open-file limit is " << original.rlim_max << ", too low to lower the soft one below it");
    return;
  }
  Cluster c(1, 1);
  rlimit lowered = original;
  lowered.rlim_cur = 256;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  int s = c.startScheduler();  // inherits the soft limit of 256
  REQUIRE(setrlimit(RLIMIT_NOFILE, &original) == 0);
  REQUIRE(c.waitForLog(s, "scheduler listening", 20s));
  auto [soft, hard] = openFileLimits(c.pid(s));
  INFO("soft " << soft << ", hard " << hard);
  CHECK_FALSE(hard.empty());
  CHECK(soft == hard);
  CHECK(soft != "256");
}
