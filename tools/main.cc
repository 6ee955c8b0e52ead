// The zps binary. `zps` alone runs the role DMLC_ROLE names (scheduler or server); worker programs are
// subcommands (`zps check`, `zps bench`) that run as DMLC_ROLE=worker; `zps launch` runs a whole job
// locally. Exit codes: 0 success, 1 job failure, 2 user error (bad env, flag or argument).
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <sys/resource.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/gpu_report.h"
#include "ps/common/config.h"
#include "ps/node/observability.h"
#include "ps/node/signals.h"
#include "ps/server/server.h"
#include "scheduler/scheduler.h"
#include "tools/launch.h"
#include "tools/programs.h"

// gflags ends the process through this pointer on a bad command line (code 1) and after --help (code
// 0). It is defined by libgflags but declared in none of its headers.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace {

constexpr const char* kUsage =
    "zps: a parameter-server training runtime\n"
    "\n"
    "usage:\n"
    "  DMLC_ROLE=scheduler zps          run the scheduler\n"
    "  DMLC_ROLE=server zps             run a server\n"
    "  DMLC_ROLE=worker zps check       check exact sums over N rounds (--rounds, --sizes, --dtypes)\n"
    "  DMLC_ROLE=worker zps bench       push-pull latency/goodput table (--sizes, --mode, --json)\n"
    "  DMLC_ROLE=worker zps train       train a model (--model linear|mlp|ctr, --data, --epochs, ...)\n"
    "  zps launch --servers S --workers W [--local-size N] -- CMD ARGS...   a whole job here\n"
    "  zps probe [--host H] [--port P]  exit 0 if the scheduler (DMLC_PS_ROOT_URI:PORT) accepts connections\n"
    "  zps status [--host H] [--metrics_port P]   the scheduler's table of nodes; exit 1 if one is\n"
    "                                   missing or dead (ZPS_METRICS_PORT on the scheduler)\n"
    "  zps trace merge OUT IN...        merge ZPS_TRACE_ON timeline files into one trace\n"
    "  zps version [--gpu]              the version; --gpu: the build's CUDA, the driver, each GPU, cuBLAS\n"
    "                                   and NCCL (exit 1 when no GPU can run zps's kernels)\n"
    "\n"
    "Every role reads DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_SERVER, DMLC_NUM_WORKER; see docs/running.md\n"
    "for the full list. Every ZPS_* setting but the auth token, ZPS_CURVE and ZPS_TEST_* is also a flag\n"
    "(ZPS_RENDEZVOUS_TIMEOUT = --rendezvous_timeout).\n";

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
      std::cerr << "zps: DMLC_ROLE=worker needs a worker program: zps check, zps bench, zps train (see zps help)" << std::endl;
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

int main(int argc, char** argv) {
  raiseOpenFileLimit();
  std::string sub = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  if (sub == "launch") return zps::launchMain(argc - 1, argv + 1);
  if (sub == "trace") return zps::traceMain(argc - 1, argv + 1);
  if (sub == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (sub == "version") {
    std::cout << "zps 0.1.0 (protocol 1)" << std::endl;
    if (argc > 2 && std::strcmp(argv[2], "--gpu") == 0) {
      const zps::kernels::GpuReport gpu = zps::kernels::gpuReport();
      std::cout << gpu.text << "gpu: " << (gpu.usable ? "usable" : "not usable") << std::endl;
      return gpu.usable ? 0 : 1;
    }
    return 0;
  }

  // Drop the subcommand so gflags sees only flags.
  std::vector<char*> args(argv, argv + argc);
  if (!sub.empty()) args.erase(args.begin() + 1);
  int n = static_cast<int>(args.size());
  char** a = args.data();
  // An unknown flag or a bad flag value is a user error: exit 2, as for every other one.
  google::gflags_exitfunc = [](int code) { std::exit(code == 0 ? 0 : 2); };
  gflags::SetUsageMessage(kUsage);
  gflags::SetVersionString("0.1.0");
  gflags::ParseCommandLineFlags(&n, &a, true);
  if (n > 1) {
    std::cerr << "zps: unexpected argument '" << a[1] << "'\n\n" << kUsage;
    return 2;
  }
  if (sub == "probe") return zps::probeMain();
  if (sub == "status") return zps::statusMain();

  zps::installTerminationHandler();
  if (sub.empty()) return runRole(argv[0], "");
  if (sub == "check" || sub == "bench" || sub == "train") {
    const char* role = std::getenv("DMLC_ROLE");
    if (role != nullptr && std::strcmp(role, "worker") != 0 && role[0] != '\0') return runRole(argv[0], sub);
    int verbose = 0;
    if (const char* v = std::getenv("PS_VERBOSE"); v != nullptr) verbose = std::atoi(v);
    zps::setupLogging(argv[0], verbose);
    if (sub == "train") return zps::trainMain();
    return sub == "check" ? zps::checkMain() : zps::benchMain();
  }
  std::cerr << "zps: unknown command '" << sub << "'\n\n" << kUsage;
  return 2;
}
