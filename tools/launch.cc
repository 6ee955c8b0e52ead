#include "tools/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ps/common/settings.h"
#include "ps/node/auth.h"
#include "tools/launch_args.h"
#include "tools/launch_checks.h"
#include "tools/launch_children.h"
#include "tools/launch_job_status.h"
#include "tools/launch_output.h"
#include "tools/launch_python.h"
#include "tools/launch_signals.h"
#include "tools/process.h"
#include "zps/status.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kStopGrace{5000};
// After a child fails, the others get this long to end on their own before SIGTERM: a worker whose
// script raised ends the job through the scheduler, which tells every other node which worker
// failed, and they need a moment to say so.
constexpr milliseconds kFailureGrace{10000};
// A child that never prints a newline must not grow launch's memory without bound.
constexpr size_t kMaxLineBytes = 64 * 1024;
// The scheduler's log line once it is bound (scheduler/scheduler.cc), and how long launch waits for it.
constexpr const char* kSchedulerListening = "scheduler listening on";
constexpr milliseconds kSchedulerListenTimeout{60'000};

// Runs one job: starts the children, relays their output, and stops them all. Created and run by
// launchMain on the main thread; owns the children, which never outlive it.
class Launcher {
 public:
  explicit Launcher(LaunchConfig config) : config_(std::move(config)) {}

  int run();

 private:
  Status startAll();
  Status waitForSchedulerListening();
  int startFailureCode(const Status& s) const;
  void pumpOutput(int timeout_ms);
  void readChild(Child& child);
  void reapExited();
  void stopAll();
  void refreshStatus();
  bool workersNeverJoined();
  int runningCount() const { return zps::runningCount(children_); }
  std::string runningList() const { return zps::runningList(children_); }

  LaunchConfig config_;
  int port_ = 0;
  bool scheduler_listening_ = false;  // its "listening on" line was seen
  std::string status_token_;          // the job's token, which the scheduler's /api/summary needs
  // The status line: shown in place on a terminal, else as plain lines; read from the scheduler's
  // HTTP endpoint (status_port_ 0: off).
  bool tty_ = false;
  std::chrono::duration<double> status_every_{0};
  std::string status_host_;
  int status_port_ = 0;
  JobStatus job_status_{"", 0, ""};
  Clock::time_point next_status_{};
  std::vector<Child> children_;
  std::optional<size_t> first_failure_;
  // Job end: the worker children whose exit 0 was checked against the scheduler, and the ranks of those
  // that exited 0 without ever joining the job.
  std::set<size_t> clean_exits_checked_;
  std::set<int> never_joined_;
  StopSignals signals_;
};

Status Launcher::startAll() {
  const std::string self = proc::selfExe();
  std::vector<std::pair<std::string, std::string>> common = {
      {"DMLC_PS_ROOT_URI", config_.host},
      {"DMLC_PS_ROOT_PORT", std::to_string(port_)},
      {"DMLC_NUM_SERVER", std::to_string(config_.servers)},
      {"DMLC_NUM_WORKER", std::to_string(config_.workers)},
      {"DMLC_NODE_HOST", config_.host},
  };
  std::vector<std::string> command = config_.command;
  const std::string& program = command[0];
  if (program == "check" || program == "bench" || program == "train") {
    command.insert(command.begin(), self);
  } else {
    PythonLaunch python = preparePythonLaunch(std::move(command), self);
    for (const auto& note : python.notes) say(note);
    if (!python.python_path.empty()) common.emplace_back("PYTHONPATH", python.python_path);
    // torch.distributed's env:// rendezvous (init_process_group("zps")) needs a store address; rank 0
    // runs it on this host.
    if (std::getenv("MASTER_ADDR") == nullptr && std::getenv("MASTER_PORT") == nullptr) {
      common.emplace_back("MASTER_ADDR", config_.host == "0.0.0.0" ? "127.0.0.1" : config_.host);
      common.emplace_back("MASTER_PORT", std::to_string(std::max(proc::pickFreeTcpPort(), 0)));
    }
    command = std::move(python.command);
  }
  // glog writes to files under /tmp by default; here the point is to see every role's log.
  if (std::getenv("GLOG_logtostderr") == nullptr) common.emplace_back("GLOG_logtostderr", "1");
  // The status line is only as fresh as the heartbeats that carry the workers' progress (every 5 s
  // by default); on one machine a heartbeat a second costs nothing.
  const EnvLookup env = processEnv();
  if (status_every_.count() > 0 && status_every_.count() < 5 && !settingText(env, settings::kHeartbeatInterval)) {
    common.emplace_back("ZPS_HEARTBEAT_INTERVAL", "1");
  }
  if (auto token = freshJobToken()) {
    common.push_back(*token);
    status_token_ = token->second;
  } else if (auto user_token = tokenFromEnvironment(); user_token.ok()) {
    status_token_ = *user_token;
  }
  ZPS_RETURN_IF_ERROR(checkRoleSettings(common));

  auto start = [&](std::string label, std::vector<std::string> argv,
                   std::vector<std::pair<std::string, std::string>> env, std::vector<std::string> unset) -> Status {
    proc::SpawnOptions options;
    options.argv = std::move(argv);
    options.env = common;
    options.env.insert(options.env.end(), env.begin(), env.end());
    options.unset_env = std::move(unset);
    auto process = proc::Subprocess::spawn(options);
    if (!process.ok()) return process.status().withContext("cannot start " + label);
    int fd = process.value()->outputFd();
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    children_.push_back(Child{label, std::move(process).value(), LinePrefixer(label, kMaxLineBytes)});
    return Status::OK();
  };

  // Every child shares this host, so one ZPS_METRICS_PORT=P becomes P for the scheduler (its dashboard
  // and zps status), P+1+i for server i and P+1+S+i for worker i.
  ZPS_ASSIGN_OR_RETURN(const long long metrics_port, readInteger(env, settings::kMetricsPort));
  auto metricsEnv = [&](int offset) -> std::pair<std::string, std::string> {
    return {"ZPS_METRICS_PORT", metrics_port > 0 ? std::to_string(metrics_port + offset) : "0"};
  };
  std::vector<std::pair<std::string, std::string>> scheduler_env = {{"DMLC_ROLE", "scheduler"}, metricsEnv(0)};
  // The status line reads the scheduler's one-line summary. Without a port from the user, the
  // scheduler alone gets a free one, listening on launch's --host only (a later env entry wins).
  ZPS_ASSIGN_OR_RETURN(const std::string metrics_host, readText(env, settings::kMetricsHost));
  status_host_ = !metrics_host.empty() ? metrics_host : config_.host;
  if (status_every_.count() > 0 && metrics_port > 0) {
    status_port_ = static_cast<int>(metrics_port);
  } else if (status_every_.count() > 0) {
    status_port_ = std::max(proc::pickFreeTcpPort(), 0);
    scheduler_env.emplace_back("ZPS_METRICS_PORT", std::to_string(status_port_));
    if (metrics_host.empty()) scheduler_env.emplace_back("ZPS_METRICS_HOST", config_.host);
  }
  if (status_host_ == "0.0.0.0") status_host_ = "127.0.0.1";
  job_status_ = JobStatus(status_host_, status_port_, status_token_);
  ZPS_RETURN_IF_ERROR(start("scheduler", {self}, std::move(scheduler_env), {"DMLC_WORKER_ID", "ZPS_SERVER_ID"}));
  ZPS_RETURN_IF_ERROR(waitForSchedulerListening());
  for (int i = 0; i < config_.servers; ++i) {
    ZPS_RETURN_IF_ERROR(start("server " + std::to_string(i), {self},
                              {{"DMLC_ROLE", "server"}, {"ZPS_SERVER_ID", std::to_string(i)}, metricsEnv(1 + i)},
                              {"DMLC_WORKER_ID"}));
  }
  const int local = launchLocalSize(config_);
  for (int i = 0; i < config_.workers; ++i) {
    for (int l = 0; l < local; ++l) {
      WorkerProcess p = workerProcess(config_, i, l, local);
      p.env.push_back(metricsEnv(p.metrics_offset));
      ZPS_RETURN_IF_ERROR(start(std::move(p.label), command, std::move(p.env), std::move(p.unset)));
    }
  }
  return Status::OK();
}

// Nodes start only once the scheduler listens on its port: a node started earlier could reach another
// job's scheduler on that port (launch's port check and the scheduler's bind are not atomic).
Status Launcher::waitForSchedulerListening() {
  const auto deadline = Clock::now() + kSchedulerListenTimeout;
  while (!scheduler_listening_) {
    pumpOutput(100);
    reapExited();
    if (children_.front().exit_code)
      return Aborted("the scheduler exited with code " + std::to_string(*children_.front().exit_code) +
                     " before it listened on port " + std::to_string(port_) + "; no node was started");
    if (signals_.stopSignal() != 0) return Aborted("stopped by a signal while the scheduler started");
    if (Clock::now() >= deadline)
      return DeadlineExceeded("the scheduler did not listen on port " + std::to_string(port_) + " within " +
                              std::to_string(kSchedulerListenTimeout.count() / 1000) + " s");
  }
  return Status::OK();
}

// A bad setting is a user error (2), as is whatever made the scheduler exit 2; a process that cannot
// be started is 127.
int Launcher::startFailureCode(const Status& s) const {
  if (s.code() == StatusCode::kInvalidArgument) return 2;
  if (!children_.empty() && children_.front().exit_code) {
    int code = *children_.front().exit_code;
    return code > 0 ? code : 1;
  }
  return s.code() == StatusCode::kDeadlineExceeded ? 1 : 127;
}

void Launcher::readChild(Child& child) {
  char buf[65536];
  while (!child.eof) {
    ssize_t n = read(child.process->outputFd(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // EAGAIN: drained for now
    if (n == 0) {
      child.eof = true;
      writeOut(child.output.flush());
      return;
    }
    const std::string lines = child.output.feed(std::string_view(buf, static_cast<size_t>(n)));
    if (!scheduler_listening_ && &child == &children_.front() && lines.find(kSchedulerListening) != std::string::npos)
      scheduler_listening_ = true;
    writeOut(lines);
  }
}

void Launcher::pumpOutput(int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  fds.push_back({signals_.wakeFd(), POLLIN, 0});
  owners.push_back(nullptr);
  for (auto& child : children_) {
    if (child.eof) continue;
    fds.push_back({child.process->outputFd(), POLLIN, 0});
    owners.push_back(&child);
  }
  int ready = poll(fds.data(), fds.size(), timeout_ms);
  if (ready <= 0) return;  // timeout or EINTR: the caller re-checks everything anyway
  signals_.drain();
  for (size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents != 0) readChild(*owners[i]);
  }
}

void Launcher::reapExited() {
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& child = children_[i];
    if (child.exit_code) continue;
    auto code = child.process->poll();
    if (!code) continue;
    // Its last words are already in the pipe; show them before the exit line.
    readChild(child);
    writeOut(child.output.flush());
    child.exit_code = *code;
    if (*code != 0 && !child.stopped && !first_failure_ && signals_.stopSignal() == 0) {
      first_failure_ = i;
      say(child.label + " exited with code " + std::to_string(*code) +
          (runningCount() > 0 ? "; stopping the others (10 s to end on their own first)" : ""));
    }
  }
}

void Launcher::refreshStatus() {
  if (!job_status_.enabled() || Clock::now() < next_status_) return;
  next_status_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(status_every_);
  auto summary = job_status_.summary();
  if (!summary) return;  // not up yet, or already gone at the end of the job: keep what is shown
  if (tty_) {
    setStatusLine("zps launch: " + *summary);
  } else {
    say("status: " + *summary);
  }
}

// A worker that exited 0 while its rank is still "missing" at the scheduler never called init(): the
// rendezvous cannot complete without it, so every worker that joined would wait out
// ZPS_RENDEZVOUS_TIMEOUT. Returns true (end the job now) once such a worker exists and every worker still
// running has joined; workers still running that have not joined are left to finish on their own.
bool Launcher::workersNeverJoined() {
  auto workerRank = [](const Child& child) {
    return child.label.starts_with("worker ") ? std::atoi(child.label.c_str() + 7) : -1;
  };
  std::vector<size_t> fresh;
  for (size_t i = 0; i < children_.size(); ++i) {
    const Child& child = children_[i];
    if (workerRank(child) >= 0 && child.exit_code == 0 && !child.stopped && !clean_exits_checked_.contains(i))
      fresh.push_back(i);
  }
  if (fresh.empty() && never_joined_.empty()) return false;
  auto states = job_status_.workerStates();
  if (!states) return false;
  for (size_t i : fresh) {
    clean_exits_checked_.insert(i);
    const int rank = workerRank(children_[i]);
    auto it = states->find(rank);
    if (it == states->end() || it->second != "missing") continue;
    never_joined_.insert(rank);
    say(children_[i].label +
        " exited 0 without joining the job (it never called init()); the job cannot start "
        "without it");
  }
  if (never_joined_.empty()) return false;
  for (const Child& child : children_) {
    const int rank = workerRank(child);
    if (rank < 0 || child.exit_code) continue;
    auto it = states->find(rank);
    if (it == states->end() || it->second == "missing") return false;  // may still end on its own
  }
  std::string ranks;
  for (int r : never_joined_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  say("ending the job: worker" + std::string(never_joined_.size() > 1 ? "s " : " ") + ranks +
      " exited without joining it" + (runningCount() > 0 ? "; stopping " + runningList() : ""));
  return true;
}

void Launcher::stopAll() {
  for (auto& child : children_) {
    if (child.exit_code) continue;
    child.stopped = true;
    child.process->signal(SIGTERM);
  }
  // Keep relaying output while they shut down: their last lines say why, and a child blocked on a
  // full pipe could not exit at all.
  const auto deadline = Clock::now() + kStopGrace;
  const int signals_before = signals_.stopCount();
  while (runningCount() > 0 && Clock::now() < deadline) {
    // A second Ctrl-C means "now": skip the rest of the grace period.
    if (signals_.stopCount() != signals_before) break;
    pumpOutput(50);
    reapExited();
  }
  if (runningCount() > 0) {
    say("still running after SIGTERM: " + runningList() + "; sending SIGKILL");
    for (auto& child : children_) {
      if (!child.exit_code) child.process->signal(SIGKILL);
    }
    while (runningCount() > 0) {
      pumpOutput(50);
      reapExited();
    }
  }
  for (auto& child : children_) {
    if (!child.eof) readChild(child);
    writeOut(child.output.flush());
  }
}

int Launcher::run() {
  Status s = signals_.install();
  if (!s.ok()) {
    say(s.toString());
    return 1;
  }
  const char* term = std::getenv("TERM");
  tty_ = isatty(STDOUT_FILENO) == 1 && !(term != nullptr && std::string_view(term) == "dumb");
  status_every_ = std::chrono::duration<double>(config_.progress_s >= 0 ? config_.progress_s : tty_ ? 1 : 30);
  next_status_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(status_every_);
  port_ = config_.port != 0 ? config_.port : proc::pickFreeTcpPort();
  if (port_ <= 0) {
    say("cannot find a free TCP port on 127.0.0.1; pass --port");
    return 1;
  }
  say("scheduler " + config_.host + ":" + std::to_string(port_) + ", " + std::to_string(config_.servers) +
      (config_.servers == 1 ? " server, " : " servers, ") + std::to_string(config_.workers) +
      (config_.workers == 1 ? " worker" : " workers"));

  s = startAll();
  if (!s.ok()) {
    say(s.message());
    stopAll();
    return startFailureCode(s);
  }

  std::optional<Clock::time_point> deadline;
  if (config_.timeout_s > 0) {
    deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.timeout_s));
  }
  JobEnd reason = JobEnd::kAllExited;
  int stop_signal = 0;
  while (true) {
    int wait_ms = 1000;
    for (auto until : {deadline, status_port_ > 0 ? std::optional(next_status_) : std::nullopt}) {
      if (!until) continue;
      auto left = std::chrono::duration_cast<milliseconds>(*until - Clock::now()).count();
      wait_ms = static_cast<int>(std::clamp<int64_t>(left + 1, 0, wait_ms));
    }
    pumpOutput(wait_ms);
    reapExited();
    refreshStatus();
    if (signals_.stopSignal() != 0) {
      reason = JobEnd::kSignal;
      stop_signal = signals_.stopSignal();
      say(std::string("got SIG") + sigabbrev_np(stop_signal) + "; stopping " + runningList());
      break;
    }
    if (first_failure_) {
      reason = JobEnd::kChildFailed;
      break;
    }
    if (runningCount() == 0) break;
    if (workersNeverJoined()) {
      reason = JobEnd::kNeverJoined;
      break;
    }
    if (deadline && Clock::now() >= *deadline) {
      reason = JobEnd::kTimeout;
      std::ostringstream seconds;
      seconds << config_.timeout_s;
      say("--timeout " + seconds.str() + " s expired; still running: " + runningList());
      break;
    }
  }
  setStatusLine("");  // the shutdown's lines are plain
  if (reason == JobEnd::kChildFailed) {
    const auto grace_end = Clock::now() + kFailureGrace;
    while (runningCount() > 0 && Clock::now() < grace_end && signals_.stopSignal() == 0) {
      pumpOutput(50);
      reapExited();
    }
  }
  stopAll();

  const int exit_code = jobExitCode(reason, children_, first_failure_, stop_signal);
  if (exit_code != 0) {
    for (size_t i = 0; i < children_.size(); ++i) {
      const Child& child = children_[i];
      std::string note = first_failure_ == i ? " (first failure)" : child.stopped ? " (stopped by launch)" : "";
      say(child.label + " (pid " + std::to_string(child.process->pid()) + ") exit code " +
          std::to_string(*child.exit_code) + note);
    }
  }
  return exit_code;
}

}  // namespace

int launchMain(int argc, char** argv) {
  auto config = parseLaunchArgs(argc, argv);
  if (!config.ok()) {
    std::string text = "zps launch: " + config.status().message() + "\n" + kLaunchUsage;
    ssize_t ignored = write(STDERR_FILENO, text.data(), text.size());
    (void)ignored;
    return 2;
  }
  if (config->help) {
    writeOut(kLaunchUsage);
    return 0;
  }
  Launcher launcher(std::move(config).value());
  return launcher.run();
}

}  // namespace zps
