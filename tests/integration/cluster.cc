#include "tests/integration/cluster.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "ps/node/auth.h"

// The listener below needs Catch's reporter interfaces.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

namespace zps::testing {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kStopGrace{5000};

// Catch2 v2 cannot tell a destructor whether the running test has failed (a failed CHECK does not
// throw), so this listener records it for ~Cluster's keep-or-remove decision.
bool g_test_failed = false;
std::string g_test_name = "cluster";

class FailureListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    g_test_failed = false;
    g_test_name = info.name;
  }
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    if (!stats.assertionResult.isOk()) g_test_failed = true;
    return true;
  }
};

std::string dirFriendly(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (out.size() >= 40) break;
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
  }
  return out;
}

CATCH_REGISTER_LISTENER(FailureListener)

}  // namespace

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Cluster::Cluster(int num_servers, int num_workers) : num_servers_(num_servers), num_workers_(num_workers) {
  const char* bin = std::getenv("ZPS_BIN");
  if (bin == nullptr || *bin == '\0') {
    FAIL(
        "ZPS_BIN is not set: run integration tests through ctest, or export "
        "ZPS_BIN=<build>/bin/zps");
  }
  bin_ = bin;
  if (access(bin_.c_str(), X_OK) != 0) FAIL("ZPS_BIN=" << bin_ << " is not an executable file");

  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/zps-it-" + dirFriendly(g_test_name) + "-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) FAIL("mkdtemp " << pattern << ": " << strerror(errno));
  dir_ = pattern;

  port_ = proc::pickFreeTcpPort();
  REQUIRE(port_ > 0);
  env_ = {
      {"DMLC_PS_ROOT_URI", "127.0.0.1"},
      {"DMLC_PS_ROOT_PORT", std::to_string(port_)},
      {"DMLC_NUM_SERVER", std::to_string(num_servers_)},
      {"DMLC_NUM_WORKER", std::to_string(num_workers_)},
      {"DMLC_NODE_HOST", "127.0.0.1"},
      {"GLOG_logtostderr", "1"},
  };
}

Cluster::~Cluster() {
  stopAll();
  const char* keep = std::getenv("ZPS_KEEP_TEST_LOGS");
  bool keep_logs = g_test_failed || std::uncaught_exceptions() > 0 || (keep != nullptr && std::string(keep) == "1");
  if (keep_logs) {
    std::cerr << "zps::testing::Cluster: logs kept in " << dir_ << "\n";
    return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void Cluster::setEnv(std::string key, std::string value) { env_.emplace_back(std::move(key), std::move(value)); }

int Cluster::startScheduler(const Env& extra) {
  Env env = {{"DMLC_ROLE", "scheduler"}};
  env.insert(env.end(), extra.begin(), extra.end());
  return start("scheduler", {bin_}, env);
}

int Cluster::startServer(const Env& extra) {
  int id = servers_started_++;
  Env env = {{"DMLC_ROLE", "server"}, {"ZPS_SERVER_ID", std::to_string(id)}};
  env.insert(env.end(), extra.begin(), extra.end());
  return start("server" + std::to_string(id), {bin_}, env);
}

int Cluster::startWorker(int worker_id, std::vector<std::string> args, const Env& extra) {
  Env env = {{"DMLC_ROLE", "worker"}};
  if (worker_id >= 0) env.emplace_back("DMLC_WORKER_ID", std::to_string(worker_id));
  env.insert(env.end(), extra.begin(), extra.end());
  args.insert(args.begin(), bin_);
  return start(worker_id >= 0 ? "worker" + std::to_string(worker_id) : "worker", std::move(args), env);
}

int Cluster::start(std::string name, std::vector<std::string> argv, const Env& env) {
  int index = static_cast<int>(processes_.size());
  char prefix[8];
  snprintf(prefix, sizeof(prefix), "%02d-", index);
  Process p;
  p.name = std::move(name);
  p.log_path = dir_ + "/" + prefix + p.name + ".log";

  proc::SpawnOptions options;
  options.argv = std::move(argv);
  options.env = env_;
  options.env.insert(options.env.end(), env.begin(), env.end());
  // Roles set these explicitly; a developer's shell must not leak them into a test.
  for (const char* key : {"DMLC_ROLE", "DMLC_WORKER_ID", "ZPS_SERVER_ID"}) {
    options.unset_env.emplace_back(key);
  }
  options.output_path = p.log_path;
  auto spawned = proc::Subprocess::spawn(options);
  if (!spawned.ok()) FAIL("cannot start " << p.name << ": " << spawned.status().toString());
  p.process = std::move(spawned).value();
  processes_.push_back(std::move(p));
  return index;
}

int Cluster::waitExit(int index, std::chrono::seconds deadline) {
  auto code = at(index).process->waitFor(deadline);
  if (!code.ok()) FAIL(at(index).name << ": " << code.status().message() << "\n" << logTail(index));
  return code.value();
}

bool Cluster::waitForLog(int index, const std::string& text, std::chrono::seconds deadline) const {
  const auto until = Clock::now() + deadline;
  while (!contains(log(index), text)) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<int> Cluster::waitAll(std::chrono::seconds deadline) {
  const auto until = Clock::now() + deadline;
  std::vector<int> codes;
  for (int i = 0; i < static_cast<int>(processes_.size()); ++i) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    auto code = at(i).process->waitFor(std::max(left, std::chrono::milliseconds(0)));
    if (code.ok()) {
      codes.push_back(code.value());
      continue;
    }
    std::string report;
    for (int j = i; j < static_cast<int>(processes_.size()); ++j) {
      if (!running(j)) continue;
      report += '\n';  // appended apart: GCC 12 warns (-Wrestrict, falsely) on "\n" + logTail(j) inlined here
      report += logTail(j);
    }
    FAIL("still running after " << deadline.count() << " s:" << report);
  }
  return codes;
}

void Cluster::expectAllExitZero(std::chrono::seconds deadline) {
  std::vector<int> codes = waitAll(deadline);
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(logTail(static_cast<int>(i)));
    CHECK(codes[i] == 0);
  }
}

void Cluster::expectAllExitNonZero(std::chrono::seconds deadline) {
  std::vector<int> codes = waitAll(deadline);
  for (size_t i = 0; i < codes.size(); ++i) {
    INFO(logTail(static_cast<int>(i)));
    CHECK(codes[i] != 0);
  }
}

void Cluster::signal(int index, int sig) { at(index).process->signal(sig); }

bool Cluster::running(int index) { return !at(index).process->poll().has_value(); }

pid_t Cluster::pid(int index) const { return at(index).process->pid(); }

std::string Cluster::log(int index) const { return readFile(at(index).log_path); }

std::string serverDataPassword(const std::string& server_log, const std::string& token) {
  const std::string tag = "data salt ";
  const size_t at = server_log.find(tag);
  if (at == std::string::npos) return "";
  std::string salt;
  for (size_t i = at + tag.size();
       i + 1 < server_log.size() && std::isxdigit(server_log[i]) && std::isxdigit(server_log[i + 1]); i += 2)
    salt.push_back(static_cast<char>(std::stoi(server_log.substr(i, 2), nullptr, 16)));
  return dataHandshakePassword(Authenticator::withToken(token), salt);
}

std::string Cluster::logTail(int index, int lines) const {
  const Process& p = at(index);
  std::string text = readFile(p.log_path);
  size_t begin = text.size();
  if (!text.empty() && text.back() == '\n') --begin;
  for (int n = 0; n < lines && begin > 0; ++n) {
    begin = text.rfind('\n', begin - 1);
    if (begin == std::string::npos) {
      begin = 0;
      break;
    }
  }
  if (begin > 0) ++begin;
  return "--- " + p.name + " (pid " + std::to_string(p.process->pid()) + ", " + p.log_path + "), last " +
         std::to_string(lines) + " lines ---\n" + text.substr(begin);
}

Cluster::Process& Cluster::at(int index) { return const_cast<Process&>(static_cast<const Cluster*>(this)->at(index)); }

const Cluster::Process& Cluster::at(int index) const {
  if (index < 0 || index >= static_cast<int>(processes_.size())) {
    FAIL("Cluster: no process with index " << index << " (started " << processes_.size() << ")");
  }
  return processes_[static_cast<size_t>(index)];
}

void Cluster::stopAll() {
  // All at once, so the grace periods overlap instead of adding up.
  for (auto& p : processes_) p.process->signal(SIGTERM);
  const auto deadline = Clock::now() + kStopGrace;
  for (auto& p : processes_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (p.process->waitFor(std::max(left, std::chrono::milliseconds(0))).ok()) continue;
    std::cerr << "zps::testing::Cluster: " << p.name << " (pid " << p.process->pid() << ") ignored SIGTERM for "
              << kStopGrace.count() << " ms; sending SIGKILL\n";
    p.process->signal(SIGKILL);
    // Still not reaped (stuck in the kernel)? The Subprocess destructor blocks on it.
    auto killed = p.process->waitFor(10s);
    (void)killed;
  }
}

}  // namespace zps::testing
