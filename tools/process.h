// Child processes for `zps launch` and the integration-test fixture: spawn with a prepared
// environment, capture output, wait with deadlines, and stop without ever leaving one behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zps/status.h"

namespace zps::proc {

struct SpawnOptions {
  // argv[0] is a path (has a '/') or a name looked up in PATH (the child's PATH if `env` sets it).
  std::vector<std::string> argv;
  // Set or override on top of the inherited environment; a later entry for a name wins.
  std::vector<std::pair<std::string, std::string>> env;
  // Removed from the inherited environment (an `env` entry with the same name still wins).
  std::vector<std::string> unset_env;
  // Non-empty: stdout and stderr are appended to this file. Empty: both go to one pipe whose read
  // end is Subprocess::outputFd().
  std::string output_path;
  // PR_SET_PDEATHSIG(SIGKILL): the child dies with the *thread* that spawned it, so a killed
  // launcher or test leaves no orphans. Spawn from a thread that outlives the child.
  bool die_with_parent = true;
  // Empty: inherit the parent's working directory.
  std::string cwd;
};

// One child process, owned by whoever holds the unique_ptr (the launcher, a test fixture); the
// child lives at most as long as this object: the destructor terminates and reaps it. Not
// thread-safe: one thread calls all methods. The child's stdin is /dev/null so that children never
// compete with the launcher for a terminal. The PID is only signalled while it is not yet reaped,
// so a recycled PID is never hit; nothing else in the process may reap it (no waitpid(-1), no
// SIGCHLD set to SIG_IGN).
class Subprocess {
 public:
  static constexpr std::chrono::milliseconds kDefaultGrace{5000};

  // Errors: InvalidArgument (empty argv), NotFound (argv[0] not in PATH), Unavailable (the exec
  // or the redirection failed in the child; the message carries errno's text).
  static StatusOr<std::unique_ptr<Subprocess>> spawn(const SpawnOptions& options);

  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // argv[0] as given, for messages.
  const std::string& name() const { return name_; }
  // Read end of the output pipe (close-on-exec, blocking), owned by this object; -1 when
  // SpawnOptions::output_path was used.
  int outputFd() const { return output_fd_; }

  // The exit status once the child has exited (a signal N reads as 128+N); never blocks.
  std::optional<int> poll();
  // Blocks until the child exits or `timeout` passes; on expiry returns
  // DeadlineExceeded("pid N (argv0) still running after X ms") and leaves the child running.
  StatusOr<int> waitFor(std::chrono::milliseconds timeout);
  // No-op once the child has been reaped.
  void signal(int sig);
  // SIGTERM, wait up to `grace`, then SIGKILL; reaps and returns the exit status.
  int terminate(std::chrono::milliseconds grace = kDefaultGrace);

 private:
  Subprocess(pid_t pid, int output_fd, std::string name) : pid_(pid), output_fd_(output_fd), name_(std::move(name)) {}

  pid_t pid_;
  int output_fd_;
  std::string name_;
  std::optional<int> exit_code_;
};

// Reads `fd` until EOF or until `timeout` passes (DeadlineExceeded with what was read so far in
// the message's context). For tests and short-lived children whose output fits in memory.
StatusOr<std::string> readUntilEof(int fd, std::chrono::milliseconds timeout);

// A port free on 127.0.0.1 now (bound and closed again), drawn below the kernel's ephemeral range
// (where no outgoing connection takes it before the caller binds it) when there is room, else the
// one bind(0) gives; -1 on failure. Another process may still bind it first.
int pickFreeTcpPort();

// The first port of the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range; 32768 when
// unreadable).
int ephemeralPortLow();

// This program's path, to start more of itself; "/proc/self/exe" when the file was replaced since
// (a rebuilt binary), which still executes the running image.
std::string selfExe();

// Exit status in the shell's convention: the exit code, or 128+N for a death by signal N.
int decodeWaitStatus(int wait_status);

}  // namespace zps::proc
