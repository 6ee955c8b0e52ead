#include "tools/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <thread>

extern char** environ;

namespace zps::proc {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string errnoText(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof(buf));  // GNU variant: returns the message pointer
}

// What the child writes to the close-on-exec error pipe when it cannot reach exec.
struct ChildError {
  int stage;
  int err;
};

enum ChildStage : int { kStageDeathSignal, kStageStdin, kStageOutput, kStageCwd, kStageExec };

const char* stageName(int stage) {
  switch (stage) {
    case kStageDeathSignal: return "prctl(PR_SET_PDEATHSIG)";
    case kStageStdin: return "redirecting stdin";
    case kStageOutput: return "redirecting output";
    case kStageCwd: return "chdir";
    case kStageExec: return "exec";
  }
  return "setup";
}

// Everything the child needs, prepared before fork so the child only makes async-signal-safe calls.
struct ChildPlan {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* cwd;  // nullptr: inherit
  int stdin_fd;
  int output_fd;
  int error_fd;
  bool die_with_parent;
  pid_t parent_pid;
};

[[noreturn]] void childFail(int error_fd, int stage) {
  ChildError e{stage, errno};
  ssize_t ignored = write(error_fd, &e, sizeof(e));
  (void)ignored;
  _exit(127);
}

// Runs in the forked child. All signals are blocked on entry (the parent blocked them around fork)
// so none of the parent's handlers can run here before they are reset.
[[noreturn]] void runChild(const ChildPlan& plan) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    bool caught = (old.sa_flags & SA_SIGINFO) != 0 || (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN);
    // SIGPIPE is reset too: launch ignores it for its own stdout, children expect the default.
    if (caught || sig == SIGPIPE) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  if (plan.die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) childFail(plan.error_fd, kStageDeathSignal);
    // The parent may have died before prctl took effect.
    if (getppid() != plan.parent_pid) _exit(127);
  }
  // The parent moved these fds above 2, so dup2 never overwrites one of them before it is used.
  if (dup2(plan.stdin_fd, STDIN_FILENO) < 0) childFail(plan.error_fd, kStageStdin);
  if (dup2(plan.output_fd, STDOUT_FILENO) < 0 || dup2(plan.output_fd, STDERR_FILENO) < 0) {
    childFail(plan.error_fd, kStageOutput);
  }
  // Descriptors that other code opened without O_CLOEXEC (sockets, other children's pipes) must
  // not leak into the child; older kernels lack close_range, which only costs that protection.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) childFail(plan.error_fd, kStageCwd);
  execve(plan.path, plan.argv, plan.envp);
  childFail(plan.error_fd, kStageExec);
}

// Owns one descriptor in the parent; closes it on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Returns a close-on-exec duplicate of `fd` numbered 3 or above (closing `fd`), so that a parent
// with stdin/stdout/stderr closed cannot hand the child a descriptor that dup2 would clobber.
StatusOr<int> moveAboveStdio(int fd) {
  if (fd > STDERR_FILENO) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  int err = errno;
  close(fd);
  if (moved < 0) return Unavailable("fcntl(F_DUPFD_CLOEXEC): " + errnoText(err));
  return moved;
}

StatusOr<std::vector<std::string>> buildEnvironment(const SpawnOptions& options) {
  std::set<std::string, std::less<>> dropped(options.unset_env.begin(), options.unset_env.end());
  for (const auto& [key, value] : options.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return InvalidArgument("bad environment variable name '" + key + "'");
    }
    dropped.insert(key);
  }
  std::vector<std::string> result;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (!dropped.contains(text.substr(0, text.find('=')))) result.emplace_back(text);
  }
  // A later entry for the same name wins; envp must hold each name once, since getenv returns
  // the first match.
  for (size_t i = 0; i < options.env.size(); ++i) {
    const auto& [key, value] = options.env[i];
    bool overridden = std::any_of(options.env.begin() + static_cast<std::ptrdiff_t>(i) + 1, options.env.end(),
                                  [&](const auto& e) { return e.first == key; });
    if (!overridden) result.push_back(key + "=" + value);
  }
  return result;
}

std::optional<std::string> findInPath(const std::string& name, const std::vector<std::string>& child_env) {
  std::string path_value = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& entry : child_env) {
    if (entry.starts_with("PATH=")) path_value = entry.substr(5);
  }
  size_t begin = 0;
  while (begin <= path_value.size()) {
    size_t end = path_value.find(':', begin);
    if (end == std::string::npos) end = path_value.size();
    std::string dir = path_value.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    begin = end + 1;
  }
  return std::nullopt;
}

pid_t waitpidNoIntr(pid_t pid, int* wait_status, int flags) {
  pid_t r;
  do {
    r = waitpid(pid, wait_status, flags);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

int decodeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

StatusOr<std::unique_ptr<Subprocess>> Subprocess::spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return InvalidArgument("spawn: empty argv");
  }
  const std::string& name = options.argv[0];
  auto context = [&](const Status& s) { return s.withContext("spawn '" + name + "'"); };

  auto env_or = buildEnvironment(options);
  if (!env_or.ok()) return context(env_or.status());
  std::vector<std::string> env = std::move(env_or).value();

  std::string path = name;
  if (name.find('/') == std::string::npos) {
    auto found = findInPath(name, env);
    if (!found) return context(NotFound("not found in PATH"));
    path = *found;
  }

  std::vector<char*> argv_ptrs;
  for (const auto& arg : options.argv) argv_ptrs.push_back(const_cast<char*>(arg.c_str()));
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  for (const auto& entry : env) env_ptrs.push_back(const_cast<char*>(entry.c_str()));
  env_ptrs.push_back(nullptr);

  auto openChecked = [&](const std::string& file, int flags) -> StatusOr<int> {
    int fd = open(file.c_str(), flags | O_CLOEXEC, 0644);
    if (fd < 0) return Unavailable("open " + file + ": " + errnoText(errno));
    return moveAboveStdio(fd);
  };
  auto pipeChecked = [&](Fd& read_end, Fd& write_end) -> Status {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable("pipe2: " + errnoText(errno));
    Fd r(fds[0]), w(fds[1]);
    auto r_moved = moveAboveStdio(r.release());
    if (!r_moved.ok()) return r_moved.status();
    read_end.reset(r_moved.value());
    auto w_moved = moveAboveStdio(w.release());
    if (!w_moved.ok()) return w_moved.status();
    write_end.reset(w_moved.value());
    return Status::OK();
  };

  Fd stdin_fd, output_read, output_write, error_read, error_write;
  {
    auto fd = openChecked("/dev/null", O_RDONLY);
    if (!fd.ok()) return context(fd.status());
    stdin_fd.reset(fd.value());
  }
  if (options.output_path.empty()) {
    Status s = pipeChecked(output_read, output_write);
    if (!s.ok()) return context(s);
  } else {
    auto fd = openChecked(options.output_path, O_WRONLY | O_CREAT | O_APPEND);
    if (!fd.ok()) return context(fd.status());
    output_write.reset(fd.value());
  }
  {
    Status s = pipeChecked(error_read, error_write);
    if (!s.ok()) return context(s);
  }

  ChildPlan plan{
      path.c_str(),   argv_ptrs.data(),   env_ptrs.data(),   options.cwd.empty() ? nullptr : options.cwd.c_str(),
      stdin_fd.get(), output_write.get(), error_write.get(), options.die_with_parent,
      getpid()};

  sigset_t all, saved;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = fork();
  if (pid == 0) runChild(plan);
  int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (pid < 0) return context(Unavailable("fork: " + errnoText(fork_errno)));

  stdin_fd.reset();
  output_write.reset();
  error_write.reset();
  ChildError child_error{};
  size_t got = 0;
  while (got < sizeof(child_error)) {
    ssize_t n = read(error_read.get(), reinterpret_cast<char*>(&child_error) + got, sizeof(child_error) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > 0) {
    int ignored;
    waitpidNoIntr(pid, &ignored, 0);
    if (got < sizeof(child_error)) return context(InternalError("short report from the child"));
    std::string what = stageName(child_error.stage);
    if (child_error.stage == kStageExec) what += " " + path;
    if (child_error.stage == kStageCwd) what += " " + options.cwd;
    return context(Unavailable(what + ": " + errnoText(child_error.err)));
  }
  return std::unique_ptr<Subprocess>(new Subprocess(pid, output_read.release(), name));
}

Subprocess::~Subprocess() {
  terminate();
  if (output_fd_ >= 0) close(output_fd_);
}

std::optional<int> Subprocess::poll() {
  if (exit_code_) return exit_code_;
  int wait_status = 0;
  pid_t r = waitpidNoIntr(pid_, &wait_status, WNOHANG);
  if (r == 0) return std::nullopt;
  if (r == pid_) {
    exit_code_ = decodeWaitStatus(wait_status);
  } else {
    int err = errno;
    LOG(ERROR) << "waitpid(" << pid_ << ", " << name_ << "): " << errnoText(err)
               << "; reaped elsewhere, exit status unknown";
    exit_code_ = -1;
  }
  return exit_code_;
}

StatusOr<int> Subprocess::waitFor(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  // A pidfd wakes us the moment the child exits; without one (old kernel) fall back to naps.
  Fd pidfd(static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)));
  milliseconds nap(1);
  while (true) {
    if (auto code = poll()) return *code;
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) {
      return DeadlineExceeded("pid " + std::to_string(pid_) + " (" + name_ + ") still running after " +
                              std::to_string(timeout.count()) + " ms");
    }
    if (pidfd.get() >= 0) {
      struct pollfd p {
        pidfd.get(), POLLIN, 0
      };
      ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    } else {
      std::this_thread::sleep_for(std::min(nap, left));
      nap = std::min(nap * 2, milliseconds(20));
    }
  }
}

void Subprocess::signal(int sig) {
  if (exit_code_) return;
  if (kill(pid_, sig) != 0 && errno != ESRCH) {
    LOG(WARNING) << "kill(" << pid_ << ", " << sig << "): " << errnoText(errno);
  }
}

int Subprocess::terminate(milliseconds grace) {
  if (auto code = poll()) return *code;
  signal(SIGTERM);
  auto code = waitFor(grace);
  if (code.ok()) return code.value();
  LOG(WARNING) << code.status().message() << " after SIGTERM; sending SIGKILL";
  signal(SIGKILL);
  int wait_status = 0;
  if (waitpidNoIntr(pid_, &wait_status, 0) == pid_) {
    exit_code_ = decodeWaitStatus(wait_status);
  } else {
    exit_code_ = -1;
  }
  return *exit_code_;
}

StatusOr<std::string> readUntilEof(int fd, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string out;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left <= milliseconds(0)) {
      return DeadlineExceeded("no EOF on fd " + std::to_string(fd) + " after " + std::to_string(timeout.count()) +
                              " ms; read so far: " + out);
    }
    struct pollfd p {
      fd, POLLIN, 0
    };
    int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (ready < 0 && errno != EINTR) return Unavailable("poll: " + errnoText(errno));
    if (ready <= 0) continue;
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Unavailable("read: " + errnoText(errno));
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string selfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "/proc/self/exe";
  std::string path(buf, static_cast<size_t>(n));
  if (path.ends_with(" (deleted)")) return "/proc/self/exe";
  return path;
}

namespace {

// Binds 127.0.0.1:`port` (0: the kernel picks one) and returns the port bound, -1 on failure.
int bindLoopback(int port, bool log_failure) {
  Fd sock(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) {
    LOG(ERROR) << "pickFreeTcpPort: socket: " << errnoText(errno);
    return -1;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (log_failure) LOG(ERROR) << "pickFreeTcpPort: " << errnoText(errno);
    return -1;
  }
  return ntohs(addr.sin_port);
}

}  // namespace

int ephemeralPortLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (range >> low && low > 0 && low < 65536) return low;
  return 32768;  // Linux's default
}

int pickFreeTcpPort() {
  // Below the ephemeral range only an explicit bind takes a port; inside it, any process's next
  // outgoing connection may take the port as its source between this check and the caller's bind.
  constexpr int kFloor = 10000;  // under this are the well-known and registered services' ports
  int high = ephemeralPortLow() - 1;
  if (high > kFloor) {
    std::mt19937 draw(std::random_device{}() ^ static_cast<unsigned>(getpid()));
    std::uniform_int_distribution<int> port(kFloor, high);
    for (int i = 0; i < 100; ++i) {
      int p = bindLoopback(port(draw), /*log_failure=*/false);
      if (p > 0) return p;
    }
  }
  return bindLoopback(0, /*log_failure=*/true);
}

}  // namespace zps::proc
