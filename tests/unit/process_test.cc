#include "tools/process.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace zps::proc {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Subprocess> spawnOk(SpawnOptions options) {
  auto p = Subprocess::spawn(options);
  INFO(p.status().toString());
  REQUIRE(p.ok());
  return std::move(p).value();
}

std::unique_ptr<Subprocess> shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"sh", "-c", script};
  return spawnOk(options);
}

std::string outputOf(Subprocess& p) {
  auto out = readUntilEof(p.outputFd(), 10s);
  INFO(out.status().toString());
  REQUIRE(out.ok());
  return out.value();
}

// True once no process (zombie included) has this pid any more.
bool pidGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST_CASE("Subprocess captures output and the exit code", "[process]") {
  auto p = shell("echo hi; echo err >&2; exit 3");
  CHECK(outputOf(*p) == "hi\nerr\n");
  auto code = p->waitFor(10s);
  REQUIRE(code.ok());
  CHECK(code.value() == 3);
  CHECK(p->poll() == 3);
}

TEST_CASE("Subprocess reports a missing program as an error status", "[process]") {
  SpawnOptions options;
  options.argv = {"zps-no-such-program-xyz"};
  auto p = Subprocess::spawn(options);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kNotFound);
  CHECK_THAT(p.status().message(), Catch::Contains("zps-no-such-program-xyz"));

  options.argv = {"/nonexistent/dir/prog"};
  p = Subprocess::spawn(options);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kUnavailable);
  CHECK_THAT(p.status().message(), Catch::Contains("No such file"));
}

TEST_CASE("Subprocess reports an exec failure of a non-executable file", "[process]") {
  char dir_template[] = "/tmp/zps-process-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  std::string path = std::string(dir_template) + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\necho no\n";
  chmod(path.c_str(), 0644);
  SpawnOptions options;
  options.argv = {path};
  auto p = Subprocess::spawn(options);
  unlink(path.c_str());
  rmdir(dir_template);
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(p.status().message(), Catch::Contains("exec") && Catch::Contains("ermission"));
}

TEST_CASE("Subprocess reports a bad working directory", "[process]") {
  SpawnOptions options;
  options.argv = {"true"};
  options.cwd = "/nonexistent/zps/dir";
  auto p = Subprocess::spawn(options);
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(p.status().message(), Catch::Contains("chdir /nonexistent/zps/dir"));
}

TEST_CASE("Subprocess rejects an empty argv", "[process]") {
  auto p = Subprocess::spawn(SpawnOptions{});
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("waitFor expires on a running child and terminate reaps it", "[process]") {
  SpawnOptions options;
  options.argv = {"sleep", "30"};
  auto p = spawnOk(options);
  pid_t pid = p->pid();

  auto start = std::chrono::steady_clock::now();
  auto code = p->waitFor(200ms);
  auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(code.ok());
  CHECK(code.status().code() == StatusCode::kDeadlineExceeded);
  CHECK_THAT(code.status().message(),
             Catch::Contains("pid " + std::to_string(pid) + " (sleep) still running after 200 ms"));
  CHECK(waited >= 200ms);
  CHECK(waited < 5s);
  CHECK_FALSE(p->poll().has_value());

  CHECK(p->terminate(2s) == 128 + SIGTERM);
  CHECK(pidGone(pid));
  int status;
  CHECK(waitpid(pid, &status, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("terminate escalates to SIGKILL when SIGTERM is ignored", "[process]") {
  // The child tells us when its trap is set, so SIGTERM cannot arrive before it is ignored.
  auto p = shell("trap '' TERM; echo ready; while :; do sleep 0.05; done");
  char buf[6] = {};
  REQUIRE(read(p->outputFd(), buf, 6) == 6);
  REQUIRE(std::string(buf, 6) == "ready\n");
  pid_t pid = p->pid();
  auto start = std::chrono::steady_clock::now();
  CHECK(p->terminate(300ms) == 128 + SIGKILL);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(pidGone(pid));
}

TEST_CASE("The destructor stops and reaps a running child", "[process]") {
  pid_t pid;
  {
    SpawnOptions options;
    options.argv = {"sleep", "30"};
    auto p = spawnOk(options);
    pid = p->pid();
    CHECK_FALSE(pidGone(pid));
  }
  CHECK(pidGone(pid));
}

TEST_CASE("A child that exited but was never polled is reaped by the destructor", "[process]") {
  pid_t pid;
  {
    auto p = shell("exit 0");
    pid = p->pid();
    CHECK(outputOf(*p).empty());
  }
  CHECK(pidGone(pid));
}

TEST_CASE("The child sees env overrides and not the unset variables", "[process]") {
  setenv("ZPS_PROCESS_TEST_KEEP", "kept", 1);
  setenv("ZPS_PROCESS_TEST_DROP", "dropped", 1);
  setenv("ZPS_PROCESS_TEST_OVERRIDE", "old", 1);
  SpawnOptions options;
  options.argv = {"sh", "-c",
                  "echo \"$ZPS_PROCESS_TEST_KEEP|${ZPS_PROCESS_TEST_DROP-unset}|"
                  "$ZPS_PROCESS_TEST_OVERRIDE|$ZPS_PROCESS_TEST_NEW\""};
  options.env = {
      {"ZPS_PROCESS_TEST_OVERRIDE", "first"}, {"ZPS_PROCESS_TEST_NEW", "a=b"}, {"ZPS_PROCESS_TEST_OVERRIDE", "new"}};
  options.unset_env = {"ZPS_PROCESS_TEST_DROP"};
  auto p = spawnOk(options);
  CHECK(outputOf(*p) == "kept|unset|new|a=b\n");
  CHECK(p->waitFor(10s).value() == 0);
  unsetenv("ZPS_PROCESS_TEST_KEEP");
  unsetenv("ZPS_PROCESS_TEST_DROP");
  unsetenv("ZPS_PROCESS_TEST_OVERRIDE");
}

TEST_CASE("An invalid env name is rejected before anything starts", "[process]") {
  SpawnOptions options;
  options.argv = {"true"};
  options.env = {{"A=B", "x"}};
  auto p = Subprocess::spawn(options);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A death by signal N reads as 128+N", "[process]") {
  auto p = shell("kill -USR1 $$; sleep 5");
  CHECK(p->waitFor(10s).value() == 128 + SIGUSR1);

  SpawnOptions options;
  options.argv = {"sleep", "30"};
  auto q = spawnOk(options);
  q->signal(SIGKILL);
  CHECK(q->waitFor(10s).value() == 128 + SIGKILL);
  q->signal(SIGKILL);  // after reaping: a no-op, never a recycled pid
}

TEST_CASE("Children get default signal handling even when the parent blocks signals", "[process]") {
  sigset_t term, saved;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, &saved);
  SpawnOptions options;
  options.argv = {"sleep", "30"};
  auto p = spawnOk(options);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  p->signal(SIGTERM);
  CHECK(p->waitFor(10s).value() == 128 + SIGTERM);
}

TEST_CASE("output_path appends stdout and stderr to a file, cwd is honoured", "[process]") {
  char dir_template[] = "/tmp/zps-process-test-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  const std::string log = dir + "/out.log";
  std::ofstream(log) << "before\n";

  SpawnOptions options;
  options.argv = {"sh", "-c", "pwd; echo oops >&2; exit 0"};
  options.output_path = log;
  options.cwd = dir;
  auto p = spawnOk(options);
  CHECK(p->outputFd() == -1);
  CHECK(p->waitFor(10s).value() == 0);

  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "before\n" + dir + "\noops\n");
  unlink(log.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("The child's stdin is /dev/null", "[process]") {
  auto p = shell("cat; echo done");
  CHECK(outputOf(*p) == "done\n");
}

TEST_CASE("The child inherits no descriptors beyond stdio", "[process]") {
  int leaky[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, leaky) == 0);  // deliberately not CLOEXEC
  auto p = shell("ls /proc/self/fd | wc -l");
  std::string out = outputOf(*p);
  close(leaky[0]);
  close(leaky[1]);
  // 0, 1, 2 and the fd that `ls` opens for /proc/self/fd.
  CHECK(std::stoi(out) == 4);
}

TEST_CASE("pickFreeTcpPort returns a usable port below the ephemeral range", "[process]") {
  int low = ephemeralPortLow();
  REQUIRE(low > 0);
  for (int i = 0; i < 20; ++i) {
    int port = pickFreeTcpPort();
    REQUIRE(port > 0);
    CHECK(port < 65536);
    if (low > 10001) {  // room below the range: the port is drawn there
      CHECK(port >= 10000);
      CHECK(port < low);
    }
    // Free: it can be bound at once.
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    CHECK(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    close(fd);
  }
}

}  // namespace
}  // namespace zps::proc
