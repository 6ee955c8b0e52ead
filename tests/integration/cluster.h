// Test fixture that runs the real zps binary ($ZPS_BIN) as scheduler, servers and workers on
// loopback, one log file per process in a per-test temp dir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tools/process.h"

namespace zps::testing {

using Env = std::vector<std::pair<std::string, std::string>>;

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A whole file as text ("" when it cannot be read).
std::string readFile(const std::string& path);

// The PLAIN password of a server's data connections in a job with `token`, from the data salt its
// "ready" line logs ("" when the log has none yet): what a node of the job would present.
std::string serverDataPassword(const std::string& server_log, const std::string& token);

// One job's processes for one Catch2 test case. Created on the test's stack and used from the
// test's thread only. Owns every process it starts: the destructor stops them (SIGTERM, grace,
// SIGKILL) and reaps them, also when a REQUIRE throws mid-test. The temp dir with the logs is
// removed when the test passed and kept (path printed to stderr) when it failed, or always with
// ZPS_KEEP_TEST_LOGS=1.
//
// Processes are addressed by the index that start*() returns (0, 1, 2, ... in start order).
class Cluster {
 public:
  static constexpr std::chrono::seconds kDefaultDeadline{30};

  // Fails the test when ZPS_BIN is unset or not executable. Picks a free scheduler port; base env:
  // DMLC_PS_ROOT_URI=127.0.0.1, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER,
  // DMLC_NODE_HOST=127.0.0.1, GLOG_logtostderr=1.
  Cluster(int num_servers, int num_workers);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Added to (or overriding) the env of every process started afterwards.
  void setEnv(std::string key, std::string value);

  // `extra` goes on top of the base env and setEnv's, so it can override them.
  int startScheduler(const Env& extra = {});
  // ZPS_SERVER_ID counts the servers started so far (0, 1, ...), unless `extra` sets it.
  int startServer(const Env& extra = {});
  // worker_id -1: no DMLC_WORKER_ID (to test that error). args: the subcommand and its flags,
  // e.g. {"check", "--rounds", "10"}.
  int startWorker(int worker_id, std::vector<std::string> args, const Env& extra = {});
  // Anything else: argv[0] is a path or a name in PATH; `env` goes on top of the base env.
  int start(std::string name, std::vector<std::string> argv, const Env& env = {});

  // The exit code (128+N for signal N). Fails the test, with the log's tail, if the process is
  // still running after `deadline`.
  int waitExit(int index, std::chrono::seconds deadline = kDefaultDeadline);
  // Exit codes in index order; one deadline for all of them.
  std::vector<int> waitAll(std::chrono::seconds deadline = kDefaultDeadline);
  // waitAll, then CHECKs that every process exited 0 (a failure shows that process's log tail).
  void expectAllExitZero(std::chrono::seconds deadline = kDefaultDeadline);
  // waitAll, then CHECKs that every process failed (exited non-zero within the deadline).
  void expectAllExitNonZero(std::chrono::seconds deadline = kDefaultDeadline);

  // Failure injection (SIGKILL a server, SIGSTOP a worker).
  void signal(int index, int sig);
  bool running(int index);
  pid_t pid(int index) const;

  // Everything the process wrote so far (stdout and stderr interleaved).
  std::string log(int index) const;
  // The last `lines` lines of log(index), labelled with the process name and log path.
  std::string logTail(int index, int lines = 40) const;
  // Polls log(index) until it contains `text` or `deadline` passes; false (and the caller's REQUIRE
  // shows the log) when it never came. Tests wait for a state this way instead of sleeping a fixed
  // time that a loaded machine can outlast.
  bool waitForLog(int index, const std::string& text, std::chrono::seconds deadline = std::chrono::seconds(60)) const;

  const std::string& bin() const { return bin_; }
  const std::string& dir() const { return dir_; }
  int port() const { return port_; }

 private:
  struct Process {
    std::string name;
    std::string log_path;
    std::unique_ptr<proc::Subprocess> process;
  };

  Process& at(int index);
  const Process& at(int index) const;
  void stopAll();

  int num_servers_;
  int num_workers_;
  std::string bin_;
  std::string dir_;
  int port_ = -1;
  int servers_started_ = 0;
  Env env_;  // base env plus setEnv's, in order; later entries win
  std::vector<Process> processes_;
};

}  // namespace zps::testing
