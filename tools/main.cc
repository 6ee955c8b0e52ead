// The zps binary. `zps` alone runs the role DMLC_ROLE names (scheduler or server); worker programs are
// subcommands (`zps check`, `zps bench`, `zps train`) that run as DMLC_ROLE=worker; `zps launch` runs a
// whole job locally; `zps help` describes them all (tools/help.h). Exit codes: 0 success, 1 job
// failure, 2 user error (bad env, flag or argument).
#include <glog/logging.h>
#include <sys/resource.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/gpu_report.h"
#include "ps/common/config.h"
#include "ps/common/settings.h"
#include "ps/node/observability.h"
#include "ps/node/signals.h"
#include "ps/wire/codec.h"
#include "scheduler/scheduler.h"
#include "server/server.h"
#include "tools/command_line.h"
#include "tools/help.h"
#include "tools/launch.h"
#include "tools/programs.h"

namespace {

int runRole(const char* argv0, const std::string& program) {
  auto env = zps::processEnv();
  auto config = zps::loadConfig(env);
  if (!config.ok()) {
    std::cerr << "zps: " << config.status().message() << std::endl;
    return 2;
  }
  if (zps::Status s = zps::initObservability(env); !s.ok()) {
    std::cerr << "zps: " << s.message() << std::endl;
    return 2;
  }
  zps::setupLogging(argv0, config->verbose);
  switch (config->role) {
    case zps::Role::kScheduler:
      if (!program.empty()) break;
      return zps::runScheduler(*config);
    case zps::Role::kServer:
      if (!program.empty()) break;
      return zps::runServer(*config);
    case zps::Role::kWorker:
      std::cerr << "zps: DMLC_ROLE=worker needs a worker program: zps check, zps bench, zps train (zps help lists them)"
                << std::endl;
      return 2;
  }
  std::cerr << "zps: '" << program << "' is a worker program but DMLC_ROLE=" << zps::roleName(config->role)
            << "; run it with DMLC_ROLE=worker" << std::endl;
  return 2;
}

// Each peer connection costs a file descriptor: a server holds one per worker process and the
// scheduler one per node, so the common soft limit of 1024 would cap a job near a thousand workers
// while the hard limit (often 2^20 in containers) allows far more. Raising the soft limit to the hard
// one needs no privilege.
void raiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

ZPS_FLAG(version, bool, gpu, false,
         "also report the build's CUDA, the driver, each GPU, cuBLAS and NCCL "
         "(exit 1 when no GPU can run zps's kernels)");

int versionMain() {
  std::cout << "zps " << ZPS_VERSION << " (protocol " << zps::wire::kProtocolVersion << ")" << std::endl;
  if (!FLAGS_gpu) return 0;
  const zps::kernels::GpuReport gpu = zps::kernels::gpuReport();
  std::cout << gpu.text << "gpu: " << (gpu.usable ? "usable" : "not usable") << std::endl;
  return gpu.usable ? 0 : 1;
}

int main(int argc, char** argv) {
  raiseOpenFileLimit();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string sub = !args.empty() && !args[0].starts_with("-") ? args[0] : "";
  if (!sub.empty()) args.erase(args.begin());
  const zps::CommandInfo* command = zps::findCommand(sub);
  if (command == nullptr) {
    std::cerr << "zps: unknown command '" << sub << "'; zps help lists the commands" << std::endl;
    return 2;
  }
  if (sub.empty() && !args.empty() && (args[0] == "-h" || args[0] == "--help")) {
    zps::printOverview(std::cout);
    return 0;
  }
  if (sub == "help") return zps::helpMain(args);
  if (sub == "launch") return zps::launchMain(argc - 1, argv + 1);
  auto line = zps::parseCommandLine(*command, args);
  if (!line.ok()) {
    std::cerr << zps::commandName(*command) << ": " << line.status().message() << std::endl;
    return 2;
  }
  if (line->help) {
    zps::printCommandHelp(std::cout, *command);
    return 0;
  }
  if (sub == "trace") return zps::traceMain(argc - 1, argv + 1);
  if (!line->positional.empty()) {
    std::cerr << zps::commandName(*command) << ": unexpected argument '" << line->positional[0] << "'; zps help " << sub
              << " shows the usage" << std::endl;
    return 2;
  }
  if (sub == "version") return versionMain();
  if (sub == "probe") return zps::probeMain();
  if (sub == "status") return zps::statusMain();

  zps::installTerminationHandler();
  if (sub.empty()) return runRole(argv[0], "");
  const zps::EnvLookup env = zps::processEnv();
  if (auto role = zps::settingText(env, zps::settings::kRole); role && zps::trimSpace(role->text) != "worker")
    return runRole(argv[0], sub);
  // A bad PS_VERBOSE is reported with every other setting once the program loads its configuration.
  zps::StatusOr<long long> verbose = zps::readInteger(env, zps::settings::kVerbose);
  zps::setupLogging(argv[0], verbose.ok() ? static_cast<int>(*verbose) : 0);
  if (sub == "train") return zps::trainMain();
  return sub == "check" ? zps::checkMain() : zps::benchMain();
}
