// Files that never end: /dev/zero as the token file or as a data file (refused unread: it is a device),
// and a data file whose one line is longer than the limit, end each process with exit code 2 and a
// message naming the file (and line), after reading a bounded amount.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>

#include "tests/integration/cluster.h"

using zps::testing::Cluster;
using zps::testing::contains;
using namespace std::chrono_literals;

TEST_CASE("bounded reads: /dev/zero as ZPS_AUTH_TOKEN_FILE is a user error in every role") {
  Cluster c(1, 1);
  c.setEnv("ZPS_AUTH_TOKEN_FILE", "/dev/zero");
  int s = c.startScheduler();
  int v = c.startServer();
  int w = c.startWorker(0, {"check", "--rounds", "1"});
  for (int i : {s, v, w}) {
    INFO(c.logTail(i));
    CHECK(c.waitExit(i, 20s) == 2);
    CHECK(contains(c.log(i), "ZPS_AUTH_TOKEN_FILE=/dev/zero is a device; give a regular file"));
  }
}

TEST_CASE("bounded reads: a data line past 32 MiB is refused with file:line") {
  std::string long_line = "/tmp/zps-long-line-" + std::to_string(getpid()) + ".csv";
  {
    std::ofstream out(long_line);
    out << "1,2,0\n3,4,1\n";
    std::string chunk(1 << 20, '7');
    for (int i = 0; i < 33; ++i) out << chunk;
  }
  for (const std::string& path : {std::string("/dev/zero"), long_line}) {
    Cluster c(1, 1);
    c.startScheduler();
    c.startServer();
    int w = c.startWorker(0, {"train", "--data", "csv:" + path});
    INFO(c.logTail(w));
    CHECK(c.waitExit(w, 60s) == 2);
    if (path == long_line)
      CHECK(contains(c.log(w), path + ":3: line longer than 32 MiB"));
    else
      CHECK(contains(c.log(w), "data file /dev/zero is a device; give a regular file"));
    c.waitAll(60s);
  }
  std::remove(long_line.c_str());
}
