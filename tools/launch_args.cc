#include "tools/launch_args.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace zps {

const char kLaunchUsage[] =
    "usage: zps launch --servers S --workers W [--local-size N] [--host HOST] [--port PORT]"
    " [--timeout SECONDS] [--progress SECONDS]"
    " -- CMD [ARGS...]\n"
    "  Starts a scheduler, S servers and W workers on this machine. Workers run CMD with\n"
    "  DMLC_ROLE=worker and DMLC_WORKER_ID=i; CMD 'check', 'bench' or 'train' runs that zps\n"
    "  subcommand. Any other CMD finds zps's Python package (PYTHONPATH starts with the folder that\n"
    "  belongs to this binary), and a bare 'python3' whose PATH interpreter cannot import torch runs\n"
    "  as /usr/bin/python3 (Debian's python3-torch). --host (default 127.0.0.1) is the address every\n"
    "  node advertises and reaches the scheduler at, and where the scheduler and servers listen;\n"
    "  --port (default: a free one) is the scheduler's; --timeout stops everything after\n"
    "  that many seconds (exit 124). --local-size N starts N processes per worker node (worker i.l,\n"
    "  with ZPS_LOCAL_RANK=l and ZPS_LOCAL_SIZE=N; default: one per NVIDIA_VISIBLE_DEVICES entry,\n"
    "  else 1); they reduce locally, and each sends only its share to the servers.\n"
    "  --progress: how often the job's status (each worker's step, samples/s, push/pull MB/s, from\n"
    "  the scheduler's /api/summary) is shown: in a terminal one line redrawn in place (default every\n"
    "  1 s), else a plain 'zps launch: status:' line (default every 30 s); 0 turns it off.\n";

namespace {

std::optional<long> parseInt(std::string_view text) {
  long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parseDouble(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

StatusOr<LaunchConfig> parseLaunchArgs(int argc, char** argv) {
  LaunchConfig config;
  bool have_servers = false, have_workers = false, have_separator = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") {
      have_separator = true;
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      config.help = true;
      return config;
    }
    std::string_view name = arg, value;
    if (size_t eq = arg.find('='); arg.starts_with("--") && eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (name == "--servers" || name == "--workers" || name == "--host" || name == "--port" ||
               name == "--timeout" || name == "--local-size" || name == "--progress") {
      if (i + 1 >= argc) return InvalidArgument(std::string(name) + " needs a value");
      value = argv[++i];
    } else if (arg.starts_with("-")) {
      return InvalidArgument("unknown option '" + std::string(arg) + "'");
    } else {
      return InvalidArgument("unexpected '" + std::string(arg) + "': the worker command goes after '--'");
    }
    const std::string quoted = "'" + std::string(value) + "'";
    if (name == "--servers" || name == "--workers") {
      auto n = parseInt(value);
      if (!n || *n < 1 || *n > kMaxLaunchRoleCount) {
        return InvalidArgument(std::string(name) + " must be an integer from 1 to " +
                               std::to_string(kMaxLaunchRoleCount) + ", got " + quoted);
      }
      (name == "--servers" ? config.servers : config.workers) = static_cast<int>(*n);
      (name == "--servers" ? have_servers : have_workers) = true;
    } else if (name == "--local-size") {
      auto n = parseInt(value);
      if (!n || *n < 1 || *n > 64) {
        return InvalidArgument("--local-size must be an integer from 1 to 64, got " + quoted);
      }
      config.local_size = static_cast<int>(*n);
    } else if (name == "--host") {
      if (value.empty()) return InvalidArgument("--host must not be empty");
      config.host = value;
    } else if (name == "--port") {
      auto n = parseInt(value);
      if (!n || *n < 1 || *n > 65535) {
        return InvalidArgument("--port must be an integer from 1 to 65535, got " + quoted);
      }
      config.port = static_cast<int>(*n);
    } else if (name == "--timeout") {
      auto t = parseDouble(value);
      if (!t || !(*t > 0) || *t > 1e7) {
        return InvalidArgument("--timeout must be a positive number of seconds, got " + quoted);
      }
      config.timeout_s = *t;
    } else if (name == "--progress") {
      auto t = parseDouble(value);
      if (!t || !(*t >= 0) || *t > 1e7) {
        return InvalidArgument("--progress must be a number of seconds (0: off), got " + quoted);
      }
      config.progress_s = *t;
    } else {
      return InvalidArgument("unknown option '" + std::string(name) + "'");
    }
  }
  if (!have_servers) return InvalidArgument("--servers S is required");
  if (!have_workers) return InvalidArgument("--workers W is required");
  if (!have_separator) return InvalidArgument("missing '--' before the worker command");
  for (; i < argc; ++i) config.command.emplace_back(argv[i]);
  if (config.command.empty()) return InvalidArgument("missing the worker command after '--'");
  return config;
}

int launchLocalSize(const LaunchConfig& config) {
  if (config.local_size > 0) return config.local_size;
  const char* visible = std::getenv("NVIDIA_VISIBLE_DEVICES");
  if (visible == nullptr || *visible == '\0') return 1;
  std::string_view list = visible;
  if (list == "all" || list == "none" || list == "void") return 1;
  int count = 1;
  for (char c : list) count += c == ',' ? 1 : 0;
  return std::clamp(count, 1, 64);
}

WorkerProcess workerProcess(const LaunchConfig& config, int worker, int local_rank, int local_size) {
  WorkerProcess p;
  p.label = "worker " + std::to_string(worker) + (local_size > 1 ? "." + std::to_string(local_rank) : "");
  // Local rank 0 keeps the plain metrics port; the others follow all workers.
  p.metrics_offset = local_rank == 0 ? 1 + config.servers + worker
                                     : 1 + config.servers + config.workers + worker * (local_size - 1) + local_rank - 1;
  p.env = {{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", std::to_string(worker)}};
  p.unset = {"ZPS_SERVER_ID"};
  if (local_size > 1) {
    p.env.emplace_back("ZPS_LOCAL_RANK", std::to_string(local_rank));
    p.env.emplace_back("ZPS_LOCAL_SIZE", std::to_string(local_size));
  } else {
    // A launcher inside a multi-GPU job must not hand its own local rank to its children.
    p.unset.insert(p.unset.end(), {"ZPS_LOCAL_RANK", "ZPS_LOCAL_SIZE", "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE"});
  }
  return p;
}

}  // namespace zps
