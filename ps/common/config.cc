#include "ps/common/config.h"

#include <arpa/inet.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <sstream>
#include <cstdio>
#include <cstdlib>
#include <thread>

DEFINE_double(rendezvous_timeout, 300, "ZPS_RENDEZVOUS_TIMEOUT: seconds to wait for every node to register");
DEFINE_double(rendezvous_log_interval, 10,
              "ZPS_RENDEZVOUS_LOG_INTERVAL: seconds between 'still waiting for' reports");
DEFINE_double(connect_timeout, 120,
              "ZPS_CONNECT_TIMEOUT: seconds to keep resolving and connecting to the scheduler and servers");
DEFINE_double(heartbeat_interval, 5,
              "ZPS_HEARTBEAT_INTERVAL (or PS_HEARTBEAT_INTERVAL): seconds between heartbeats");
DEFINE_double(heartbeat_timeout, 30,
              "ZPS_HEARTBEAT_TIMEOUT (or PS_HEARTBEAT_TIMEOUT): seconds of silence before a node is dead");
DEFINE_double(request_timeout, 300, "ZPS_REQUEST_TIMEOUT: seconds a worker waits for a push/pull reply");
DEFINE_double(shutdown_linger, 1, "ZPS_SHUTDOWN_LINGER: seconds to flush final messages before exit");
DEFINE_int64(partition_bytes, 4 << 20, "ZPS_PARTITION_BYTES: tensors are cut into partitions of this size");
DEFINE_int32(server_engine_threads, 2, "ZPS_SERVER_ENGINE_THREADS: summation threads per server");
DEFINE_int64(max_message_bytes, int64_t{1} << 30,
             "ZPS_MAX_MESSAGE_BYTES: largest frame a peer may send (ZMQ_MAXMSGSIZE)");
DEFINE_string(checkpoint_dir, "", "ZPS_CHECKPOINT_DIR: folder for checkpoints (servers' shards, worker 0's model)");
DEFINE_int64(checkpoint_every, 0, "ZPS_CHECKPOINT_EVERY: steps between checkpoints (0: every epoch end)");
DEFINE_bool(enable_async, false, "ZPS_ENABLE_ASYNC: asynchronous training (servers apply each push at once)");
DEFINE_double(resend_timeout, 0, "ZPS_RESEND_TIMEOUT: seconds before a worker resends an unanswered request (0: never)");
DEFINE_int32(server_id, -1, "ZPS_SERVER_ID: rank this server asks for (-1: arrival order)");
DEFINE_string(server_engine, "auto", "ZPS_SERVER_ENGINE: server summation engine: auto, cpu or cuda");
DEFINE_int32(local_rank, 0, "ZPS_LOCAL_RANK (or BYTEPS_LOCAL_RANK): this process's index on its worker node");
DEFINE_int32(local_size, 1, "ZPS_LOCAL_SIZE (or BYTEPS_LOCAL_SIZE): processes per worker node");
DEFINE_bool(recovery, false,
            "ZPS_RECOVERY: survive a lost node: hold its rank for a replacement and roll back to the latest checkpoint");
DEFINE_double(recovery_timeout, 300,
              "ZPS_RECOVERY_TIMEOUT: seconds the scheduler holds a lost node's rank before it fails the job");
DEFINE_int64(server_max_bytes, 0,
             "ZPS_SERVER_MAX_BYTES: bytes a server may hold for keys and table rows (0: half of the memory)");
DEFINE_string(shm_dir, "/dev/shm", "ZPS_SHM_DIR: folder for the local reducer's shared-memory segments");
DEFINE_string(compressor, "none",
              "ZPS_COMPRESSOR: compression of float32 tensor pushes: none, fp16, topk or randomk");
DEFINE_double(compress_ratio, zps::kDefaultCompressRatio,
              "ZPS_COMPRESS_RATIO: share of each partition's elements topk/randomk send per round, in (0, 1]");
DEFINE_int64(min_compress_bytes, 16384, "ZPS_MIN_COMPRESS_BYTES: ZPS_COMPRESSOR leaves smaller tensors dense");
DEFINE_string(local_reduce, "auto", "ZPS_LOCAL_REDUCE: local reduction backend: auto (NCCL for GPU tensors), shm or nccl");

namespace zps {

bool flagGiven(const char* name) {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo(name, &info) && !info.is_default;
}

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// A seconds setting: the flag if given, else the first env var present, else the flag's default.
Status secondsSetting(const EnvLookup& env, const char* flag, double flag_value,
                      std::vector<std::string> env_names, std::chrono::milliseconds* out) {
  if (!flagGiven(flag)) {
    for (const auto& name : env_names) {
      if (auto v = env(name)) {
        ZPS_ASSIGN_OR_RETURN(*out, parseSeconds(name, *v, "a number of seconds, e.g. " + name + "=30"));
        return Status::OK();
      }
    }
  }
  auto parsed = parseSeconds(std::string("--") + flag, std::to_string(flag_value), "");
  if (!parsed.ok()) return parsed.status();
  *out = *parsed;
  return Status::OK();
}

Status integerSetting(const EnvLookup& env, const char* flag, long long flag_value, const char* env_name,
                      long long min, long long max, long long* out) {
  std::string hint = "a whole number in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!flagGiven(flag)) {
    if (auto v = env(env_name)) {
      ZPS_ASSIGN_OR_RETURN(*out, parseInteger(env_name, *v, min, max, hint));
      return Status::OK();
    }
  }
  if (flag_value < min || flag_value > max)
    return InvalidArgument(std::string("--") + flag + "=" + std::to_string(flag_value) + " is out of range; use " +
                           hint);
  *out = flag_value;
  return Status::OK();
}

StatusOr<std::string> required(const EnvLookup& env, const std::string& name, const std::string& what) {
  auto v = env(name);
  if (!v || trim(*v).empty()) return InvalidArgument(name + " is not set; set it to " + what);
  return trim(*v);
}

}  // namespace

const char* roleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

EnvLookup processEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

StatusOr<long long> parseInteger(const std::string& name, const std::string& value, long long min,
                                 long long max, const std::string& hint) {
  std::string v = trim(value);
  std::string fix = hint.empty() ? "" : "; set it to " + hint;
  if (v.empty()) return InvalidArgument(name + " is empty" + fix);
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (errno == ERANGE || end == v.c_str() || *end != '\0')
    return InvalidArgument(name + "='" + value + "' is not a whole number" + fix);
  if (n < min || n > max)
    return InvalidArgument(name + "=" + v + " is out of range [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]" + fix);
  return n;
}

StatusOr<double> parseFraction(const std::string& name, const std::string& value) {
  std::string v = trim(value);
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !(x > 0 && x <= 1))
    return InvalidArgument(name + "='" + value + "' is not a share in (0, 1]; set it to e.g. 0.01 (1%)");
  return x;
}

StatusOr<std::chrono::milliseconds> parseSeconds(const std::string& name, const std::string& value,
                                                 const std::string& hint) {
  std::string v = trim(value);
  std::string fix = hint.empty() ? "" : "; set it to " + hint;
  errno = 0;
  char* end = nullptr;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || errno == ERANGE || end == v.c_str() || *end != '\0' || !std::isfinite(s))
    return InvalidArgument(name + "='" + value + "' is not a number of seconds" + fix);
  if (s < 0 || s > 30 * 24 * 3600.0 || (s > 0 && s < 0.001))
    return InvalidArgument(name + "=" + v + " is out of range: use 0 or 0.001 to 2592000 seconds" + fix);
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

Status resolveRequestedRank(const EnvLookup& env, Role role, int num_nodes, const std::string& hostname,
                            int* rank, std::string* source) {
  *rank = -1;
  *source = "arrival order";
  // As for every other setting, a flag given on the command line wins over the environment.
  if (role == Role::kServer && flagGiven("server_id") && FLAGS_server_id >= 0) {
    *rank = FLAGS_server_id;
    *source = "--server_id";
    return Status::OK();
  }
  std::vector<std::string> names;
  if (role == Role::kWorker) names = {"DMLC_WORKER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"};
  if (role == Role::kServer) names = {"ZPS_SERVER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"};
  for (const auto& name : names) {
    auto v = env(name);
    if (!v || trim(*v).empty()) continue;
    ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, *v, 0, 1 << 20, "a rank from 0"));
    *rank = static_cast<int>(n);
    *source = name;
    return Status::OK();
  }
  if (role == Role::kWorker) {
    // A pod of a StatefulSet, MXJob or Volcano job is named <job>-<role>-<index>.
    size_t dash = hostname.rfind('-');
    if (dash != std::string::npos && dash + 1 < hostname.size() && dash + 1 + 7 > hostname.size()) {
      std::string digits = hostname.substr(dash + 1);
      if (digits.find_first_not_of("0123456789") == std::string::npos) {
        int n = std::stoi(digits);
        if (n < num_nodes) {
          *rank = n;
          *source = "hostname " + hostname;
        } else {
          LOG(WARNING) << "hostname " << hostname << " ends in -" << n << ", which is not a worker rank below "
                       << num_nodes << "; using arrival order";
        }
      }
    }
  }
  return Status::OK();
}

StatusOr<std::string> interfaceAddress(const std::string& interface) {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Unavailable("getifaddrs failed: " + std::string(strerror(errno)));
  std::string found, names;
  for (auto* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if (!names.empty()) names += ", ";
    names += it->ifa_name;
    if (interface == it->ifa_name && found.empty()) {
      char buf[INET_ADDRSTRLEN];
      auto* sin = reinterpret_cast<struct sockaddr_in*>(it->ifa_addr);
      inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
      found = buf;
    }
  }
  freeifaddrs(list);
  if (found.empty())
    return InvalidArgument("DMLC_INTERFACE=" + interface + " has no IPv4 address; interfaces with one: " + names);
  return found;
}

std::string detectHostAddress() {
  struct ifaddrs* list = nullptr;
  std::string found = "127.0.0.1";
  if (getifaddrs(&list) != 0) return found;
  for (auto* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(it->ifa_addr)->sin_addr, buf, sizeof(buf));
    found = buf;
    break;
  }
  freeifaddrs(list);
  return found;
}

StatusOr<Config> loadConfig(const EnvLookup& env, std::optional<Role> role) {
  Config c;
  if (role) {
    c.role = *role;
  } else {
    ZPS_ASSIGN_OR_RETURN(std::string r, required(env, "DMLC_ROLE", "scheduler, server or worker"));
    if (r == "scheduler") c.role = Role::kScheduler;
    else if (r == "server") c.role = Role::kServer;
    else if (r == "worker") c.role = Role::kWorker;
    else return InvalidArgument("DMLC_ROLE='" + r + "' is not a role; set it to scheduler, server or worker");
  }

  const long long kMaxNodes = 65535;
  ZPS_ASSIGN_OR_RETURN(std::string ns, required(env, "DMLC_NUM_SERVER", "the number of server nodes, e.g. 2"));
  ZPS_ASSIGN_OR_RETURN(long long nsv, parseInteger("DMLC_NUM_SERVER", ns, 1, kMaxNodes,
                                                   "the number of server nodes, e.g. DMLC_NUM_SERVER=2"));
  ZPS_ASSIGN_OR_RETURN(std::string nw, required(env, "DMLC_NUM_WORKER", "the number of worker nodes, e.g. 2"));
  ZPS_ASSIGN_OR_RETURN(long long nwv, parseInteger("DMLC_NUM_WORKER", nw, 1, kMaxNodes,
                                                   "the number of worker nodes, e.g. DMLC_NUM_WORKER=2"));
  c.num_servers = static_cast<int>(nsv);
  c.num_workers = static_cast<int>(nwv);

  ZPS_ASSIGN_OR_RETURN(std::string port, required(env, "DMLC_PS_ROOT_PORT", "the scheduler's TCP port, e.g. 9000"));
  ZPS_ASSIGN_OR_RETURN(long long pv, parseInteger("DMLC_PS_ROOT_PORT", port, 1, 65535,
                                                  "the scheduler's TCP port, e.g. DMLC_PS_ROOT_PORT=9000"));
  c.root_port = static_cast<int>(pv);

  if (c.role == Role::kScheduler) {
    c.root_uri = trim(env("DMLC_PS_ROOT_URI").value_or(""));
  } else {
    ZPS_ASSIGN_OR_RETURN(c.root_uri,
                         required(env, "DMLC_PS_ROOT_URI", "the scheduler's host name or IP, e.g. 10.0.0.1"));
  }

  if (auto v = env("PS_VERBOSE")) {
    ZPS_ASSIGN_OR_RETURN(long long verbose, parseInteger("PS_VERBOSE", *v, 0, 3, "0, 1 or 2"));
    c.verbose = static_cast<int>(verbose);
  }

  // The port a server binds: PORT (ps-lite) or DMLC_PORT (BytePS fork); 0 = a free port.
  for (const char* name : {"DMLC_PORT", "PORT"}) {
    if (auto v = env(name); v && !trim(*v).empty()) {
      ZPS_ASSIGN_OR_RETURN(long long p, parseInteger(name, *v, 0, 65535, "a TCP port, or 0 for any free port"));
      c.node_port = static_cast<int>(p);
      break;
    }
  }

  if (auto v = env("DMLC_NODE_HOST"); v && !trim(*v).empty()) {
    c.node_host = trim(*v);
  } else if (auto itf = env("DMLC_INTERFACE"); itf && !trim(*itf).empty()) {
    ZPS_ASSIGN_OR_RETURN(c.node_host, interfaceAddress(trim(*itf)));
  } else {
    c.node_host = detectHostAddress();
  }

  char hostbuf[256] = {0};
  if (auto h = env("HOSTNAME"); h && !h->empty()) c.hostname = *h;
  else if (gethostname(hostbuf, sizeof(hostbuf) - 1) == 0) c.hostname = hostbuf;

  if (c.role != Role::kScheduler) {
    int n = c.role == Role::kWorker ? c.num_workers : c.num_servers;
    ZPS_RETURN_IF_ERROR(resolveRequestedRank(env, c.role, n, c.hostname, &c.requested_rank, &c.rank_source));
  }

  ZPS_RETURN_IF_ERROR(secondsSetting(env, "rendezvous_timeout", FLAGS_rendezvous_timeout,
                                     {"ZPS_RENDEZVOUS_TIMEOUT"}, &c.rendezvous_timeout));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "rendezvous_log_interval", FLAGS_rendezvous_log_interval,
                                     {"ZPS_RENDEZVOUS_LOG_INTERVAL"}, &c.rendezvous_log_interval));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "connect_timeout", FLAGS_connect_timeout, {"ZPS_CONNECT_TIMEOUT"},
                                     &c.connect_timeout));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "heartbeat_interval", FLAGS_heartbeat_interval,
                                     {"ZPS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_INTERVAL"}, &c.heartbeat_interval));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "heartbeat_timeout", FLAGS_heartbeat_timeout,
                                     {"ZPS_HEARTBEAT_TIMEOUT", "PS_HEARTBEAT_TIMEOUT"}, &c.heartbeat_timeout));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "request_timeout", FLAGS_request_timeout, {"ZPS_REQUEST_TIMEOUT"},
                                     &c.request_timeout));
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "shutdown_linger", FLAGS_shutdown_linger, {"ZPS_SHUTDOWN_LINGER"},
                                     &c.shutdown_linger));
  // ps-lite treats 0 as "heartbeats off"; we keep them on and read 0 as "use the default".
  if (c.heartbeat_interval.count() == 0) c.heartbeat_interval = std::chrono::milliseconds(5000);
  if (c.heartbeat_timeout.count() == 0) c.heartbeat_timeout = std::chrono::milliseconds(30000);
  if (c.heartbeat_timeout < 2 * c.heartbeat_interval)
    return InvalidArgument("heartbeat timeout (" + std::to_string(c.heartbeat_timeout.count()) +
                           " ms) must be at least twice the heartbeat interval (" +
                           std::to_string(c.heartbeat_interval.count()) + " ms); raise ZPS_HEARTBEAT_TIMEOUT");

  long long v = 0;
  ZPS_RETURN_IF_ERROR(integerSetting(env, "partition_bytes", FLAGS_partition_bytes, "ZPS_PARTITION_BYTES", 64,
                                     int64_t{1} << 30, &v));
  c.partition_bytes = static_cast<size_t>(v);
  ZPS_RETURN_IF_ERROR(integerSetting(env, "server_engine_threads", FLAGS_server_engine_threads,
                                     "ZPS_SERVER_ENGINE_THREADS", 1, 256, &v));
  c.server_engine_threads = static_cast<int>(v);
  ZPS_RETURN_IF_ERROR(integerSetting(env, "max_message_bytes", FLAGS_max_message_bytes, "ZPS_MAX_MESSAGE_BYTES",
                                     4096, int64_t{1} << 34, &v));
  c.max_message_bytes = static_cast<size_t>(v);
  ZPS_RETURN_IF_ERROR(integerSetting(env, "checkpoint_every", FLAGS_checkpoint_every, "ZPS_CHECKPOINT_EVERY", 0,
                                     int64_t{1} << 40, &v));
  c.checkpoint_every = v;
  c.checkpoint_dir = FLAGS_checkpoint_dir;
  if (!flagGiven("checkpoint_dir")) {
    if (auto d = env("ZPS_CHECKPOINT_DIR")) c.checkpoint_dir = trim(*d);
  }
  c.enable_async = FLAGS_enable_async;
  if (!flagGiven("enable_async")) {
    for (const char* name : {"ZPS_ENABLE_ASYNC", "BYTEPS_ENABLE_ASYNC"}) {
      if (auto a = env(name); a && !trim(*a).empty()) {
        ZPS_ASSIGN_OR_RETURN(long long on, parseInteger(name, *a, 0, 1, "0 or 1"));
        c.enable_async = on == 1;
        break;
      }
    }
  }
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "resend_timeout", FLAGS_resend_timeout, {"ZPS_RESEND_TIMEOUT"},
                                     &c.resend_timeout));
  if (c.resend_timeout.count() == 0 && !flagGiven("resend_timeout")) {
    if (auto r = env("PS_RESEND"); r && trim(*r) == "1") {
      long long ms = 1000;
      if (auto t = env("PS_RESEND_TIMEOUT")) {
        ZPS_ASSIGN_OR_RETURN(ms, parseInteger("PS_RESEND_TIMEOUT", *t, 1, 3600000, "milliseconds, e.g. 1000"));
      }
      c.resend_timeout = std::chrono::milliseconds(ms);
    }
  }
  c.server_engine = FLAGS_server_engine;
  std::string engine_source = "--server_engine";
  if (!flagGiven("server_engine")) {
    if (auto e = env("ZPS_SERVER_ENGINE"); e && !trim(*e).empty()) {
      c.server_engine = trim(*e);
      engine_source = "ZPS_SERVER_ENGINE";
    }
  }
  if (c.server_engine != "auto" && c.server_engine != "cpu" && c.server_engine != "cuda")
    return InvalidArgument(engine_source + "='" + c.server_engine + "' is not an engine; set it to auto, cpu or cuda");
  // Local size first: the rank's range depends on it. ZPS_* wins over BYTEPS_*, a flag over both.
  const long long kMaxLocal = kMaxLocalSize;
  c.local_size = FLAGS_local_size;
  if (!flagGiven("local_size")) {
    for (const char* name : {"ZPS_LOCAL_SIZE", "BYTEPS_LOCAL_SIZE"}) {
      if (auto s = env(name); s && !trim(*s).empty()) {
        ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, *s, 1, kMaxLocal, "the number of processes per node, e.g. 8"));
        c.local_size = static_cast<int>(n);
        break;
      }
    }
  } else if (c.local_size < 1 || c.local_size > kMaxLocal) {
    return InvalidArgument("--local_size=" + std::to_string(c.local_size) + " is out of range; use 1 to 1024");
  }
  c.local_rank = FLAGS_local_rank;
  std::string rank_name = "--local_rank";
  if (!flagGiven("local_rank")) {
    for (const char* name : {"ZPS_LOCAL_RANK", "BYTEPS_LOCAL_RANK"}) {
      if (auto r = env(name); r && !trim(*r).empty()) {
        ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, *r, 0, kMaxLocal - 1, "this process's index on its node, from 0"));
        c.local_rank = static_cast<int>(n);
        rank_name = name;
        break;
      }
    }
  }
  if (c.local_rank < 0 || c.local_rank >= c.local_size)
    return InvalidArgument(rank_name + "=" + std::to_string(c.local_rank) + " is not below the local size " +
                           std::to_string(c.local_size) + "; set ZPS_LOCAL_RANK to 0.." +
                           std::to_string(c.local_size - 1) + " or raise ZPS_LOCAL_SIZE");
  c.shm_dir = FLAGS_shm_dir;
  if (!flagGiven("shm_dir")) {
    if (auto d = env("ZPS_SHM_DIR"); d && !trim(*d).empty()) c.shm_dir = trim(*d);
  }
  if (c.shm_dir.empty() || c.shm_dir[0] != '/')
    return InvalidArgument("ZPS_SHM_DIR='" + c.shm_dir + "' must be an absolute path, e.g. /dev/shm");
  c.local_reduce = FLAGS_local_reduce;
  if (!flagGiven("local_reduce")) {
    if (auto r = env("ZPS_LOCAL_REDUCE"); r && !trim(*r).empty()) c.local_reduce = trim(*r);
  }
  if (c.local_reduce != "auto" && c.local_reduce != "shm" && c.local_reduce != "nccl")
    return InvalidArgument("ZPS_LOCAL_REDUCE='" + c.local_reduce + "' is not a local reduction backend; set it to auto, shm or nccl");
  if (auto f = env("ZPS_TEST_FAULTS")) c.test_faults = trim(*f);
  if (auto t = env("ZPS_AUTH_TOKEN")) c.auth_token = trim(*t);
  if (auto t = env("ZPS_AUTH_TOKEN_FILE")) c.auth_token_file = trim(*t);
  if (auto cv = env("ZPS_CURVE"); cv && !trim(*cv).empty()) {
    ZPS_ASSIGN_OR_RETURN(long long on, parseInteger("ZPS_CURVE", *cv, 0, 1, "0 or 1"));
    c.curve = on == 1;
  }
  c.recovery = FLAGS_recovery;
  if (!flagGiven("recovery")) {
    if (auto r = env("ZPS_RECOVERY"); r && !trim(*r).empty()) {
      ZPS_ASSIGN_OR_RETURN(long long on, parseInteger("ZPS_RECOVERY", *r, 0, 1, "0 or 1"));
      c.recovery = on == 1;
    }
  }
  ZPS_RETURN_IF_ERROR(secondsSetting(env, "recovery_timeout", FLAGS_recovery_timeout, {"ZPS_RECOVERY_TIMEOUT"},
                                     &c.recovery_timeout));
  if (c.recovery_timeout.count() == 0) return InvalidArgument("ZPS_RECOVERY_TIMEOUT must be more than 0 seconds");
  // The hard ceiling is the machine's memory: a cap above it would never protect the server. Only a
  // server checks it, since workers may run on smaller machines with the same environment.
  const uint64_t memory = physicalMemoryBytes();
  ZPS_RETURN_IF_ERROR(integerSetting(env, "server_max_bytes", FLAGS_server_max_bytes, "ZPS_SERVER_MAX_BYTES", 0,
                                     int64_t{1} << 50, &v));
  c.server_max_bytes = v > 0 ? static_cast<uint64_t>(v) : memory / 2;
  if (c.role == Role::kServer && c.server_max_bytes > memory)
    return InvalidArgument("ZPS_SERVER_MAX_BYTES=" + std::to_string(c.server_max_bytes) + " exceeds this machine's " +
                           std::to_string(memory) + " bytes of memory; set it lower, or 0 for half of the memory");
  std::string compressor = FLAGS_compressor, compressor_source = "--compressor";
  if (!flagGiven("compressor")) {
    if (auto e = env("ZPS_COMPRESSOR"); e && !trim(*e).empty()) {
      compressor = trim(*e);
      compressor_source = "ZPS_COMPRESSOR";
    }
  }
  auto kind = compressorFromName(compressor);
  if (!kind)
    return InvalidArgument(compressor_source + "='" + compressor + "' is not a compressor; set it to " +
                           std::string(kCompressorNames));
  c.compressor = *kind;
  if (!flagGiven("compress_ratio") && env("ZPS_COMPRESS_RATIO")) {
    ZPS_ASSIGN_OR_RETURN(c.compress_ratio, parseFraction("ZPS_COMPRESS_RATIO", *env("ZPS_COMPRESS_RATIO")));
  } else if (!(FLAGS_compress_ratio > 0 && FLAGS_compress_ratio <= 1)) {
    return InvalidArgument("--compress_ratio=" + std::to_string(FLAGS_compress_ratio) +
                           " is not a share in (0, 1]; use e.g. 0.01 (1%)");
  } else {
    c.compress_ratio = FLAGS_compress_ratio;
  }
  ZPS_RETURN_IF_ERROR(integerSetting(env, "min_compress_bytes", FLAGS_min_compress_bytes, "ZPS_MIN_COMPRESS_BYTES", 0,
                                     int64_t{1} << 40, &v));
  c.min_compress_bytes = static_cast<size_t>(v);
  if (c.partition_bytes > c.max_message_bytes)
    return InvalidArgument("ZPS_PARTITION_BYTES (" + std::to_string(c.partition_bytes) +
                           ") exceeds ZPS_MAX_MESSAGE_BYTES (" + std::to_string(c.max_message_bytes) + ")");
  return c;
}

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{1} << 32;
  if (FILE* f = std::fopen("/sys/fs/cgroup/memory.max", "r")) {
    unsigned long long limit = 0;
    if (std::fscanf(f, "%llu", &limit) == 1 && limit > 0 && limit < bytes) bytes = limit;  // "max": no limit
    std::fclose(f);
  }
  return bytes;
}

void setupLogging(const char* argv0, int verbose) {
  FLAGS_logtostderr = true;
  FLAGS_colorlogtostderr = false;
  if (FLAGS_v < verbose) FLAGS_v = verbose;
  static bool initialized = false;
  if (!initialized) {
    google::InitGoogleLogging(argv0);
    initialized = true;
  }
}

std::string secondsText(std::chrono::milliseconds d) {
  std::ostringstream text;
  text << d.count() / 1000.0;
  return text.str();
}

}  // namespace zps
