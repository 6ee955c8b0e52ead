#include "ps/common/config.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace zps {

const char* roleName(Role role) {
  switch (role) {
    case Role::kScheduler: return "scheduler";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
  }
  return "unknown";
}

Status resolveRequestedRank(const EnvLookup& env, Role role, int num_nodes, const std::string& hostname, int* rank,
                            std::string* source) {
  *rank = -1;
  *source = "arrival order";
  if (role == Role::kScheduler) return Status::OK();
  // As for every other setting, a flag given on the command line wins over the environment.
  if (auto flag = role == Role::kServer ? flagValue("server_id") : std::nullopt) {
    ZPS_ASSIGN_OR_RETURN(long long n,
                         parseInteger("--server_id", *flag, -1, 1 << 20, "a rank from 0, or -1 for arrival order"));
    if (n >= 0) {
      *rank = static_cast<int>(n);
      *source = "--server_id";
      return Status::OK();
    }
  }
  const Setting* setting = findSetting(role == Role::kWorker ? "worker_rank" : "server_id");
  for (const std::string& name : setting->env) {
    auto v = env(name);
    if (!v || trimSpace(*v).empty()) continue;
    ZPS_ASSIGN_OR_RETURN(long long n, parseInteger(name, *v, 0, setting->max, setting->hint));
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

namespace {

template <typename Int, typename Read>
Status readInto(Int* out, Read read) {
  ZPS_ASSIGN_OR_RETURN(auto value, read);
  *out = static_cast<Int>(value);
  return Status::OK();
}

}  // namespace

StatusOr<std::string> bindHostFrom(const EnvLookup& env) {
  ZPS_ASSIGN_OR_RETURN(std::string bind, readText(env, "bind_host"));
  if (!bind.empty()) return bind;
  ZPS_ASSIGN_OR_RETURN(std::string host, readText(env, "node_host"));
  in_addr v4;
  in6_addr v6;
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1) return host;
  return std::string("0.0.0.0");
}

namespace {

// The address this node advertises: DMLC_NODE_HOST, else DMLC_INTERFACE's address, else detected.
StatusOr<std::string> nodeHost(const EnvLookup& env) {
  ZPS_ASSIGN_OR_RETURN(std::string host, readText(env, "node_host"));
  if (!host.empty()) return host;
  ZPS_ASSIGN_OR_RETURN(std::string interface, readText(env, "interface"));
  if (!interface.empty()) return interfaceAddress(interface);
  return detectHostAddress();
}

// The cluster: role, counts, the scheduler's address and this node's, its requested rank.
Status loadCluster(const EnvLookup& env, std::optional<Role> role, Config& c) {
  if (role) {
    c.role = *role;
  } else {
    ZPS_ASSIGN_OR_RETURN(std::string r, readText(env, "role"));
    c.role = r == "scheduler" ? Role::kScheduler : r == "server" ? Role::kServer : Role::kWorker;
  }
  ZPS_RETURN_IF_ERROR(readInto(&c.num_servers, readInteger(env, "num_servers")));
  ZPS_RETURN_IF_ERROR(readInto(&c.num_workers, readInteger(env, "num_workers")));
  ZPS_RETURN_IF_ERROR(readInto(&c.root_port, readInteger(env, "root_port")));
  ZPS_ASSIGN_OR_RETURN(c.root_uri, readText(env, "root_uri"));
  if (c.role != Role::kScheduler && c.root_uri.empty())
    return InvalidArgument("DMLC_PS_ROOT_URI is not set; set it to " + findSetting("root_uri")->hint);
  ZPS_RETURN_IF_ERROR(readInto(&c.verbose, readInteger(env, "verbose")));
  ZPS_RETURN_IF_ERROR(readInto(&c.node_port, readInteger(env, "node_port")));
  ZPS_ASSIGN_OR_RETURN(c.node_host, nodeHost(env));
  ZPS_ASSIGN_OR_RETURN(c.bind_host, bindHostFrom(env));

  char hostbuf[256] = {0};
  if (auto h = env("HOSTNAME"); h && !h->empty())
    c.hostname = *h;
  else if (gethostname(hostbuf, sizeof(hostbuf) - 1) == 0)
    c.hostname = hostbuf;
  int n = c.role == Role::kWorker ? c.num_workers : c.num_servers;
  return resolveRequestedRank(env, c.role, n, c.hostname, &c.requested_rank, &c.rank_source);
}

Status loadTimeLimits(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(c.rendezvous_timeout, readSeconds(env, "rendezvous_timeout"));
  ZPS_ASSIGN_OR_RETURN(c.job_end_timeout, readSeconds(env, "job_end_timeout"));
  ZPS_ASSIGN_OR_RETURN(c.rendezvous_log_interval, readSeconds(env, "rendezvous_log_interval"));
  ZPS_ASSIGN_OR_RETURN(c.connect_timeout, readSeconds(env, "connect_timeout"));
  ZPS_ASSIGN_OR_RETURN(c.heartbeat_interval, readSeconds(env, "heartbeat_interval"));
  ZPS_ASSIGN_OR_RETURN(c.heartbeat_timeout, readSeconds(env, "heartbeat_timeout"));
  ZPS_ASSIGN_OR_RETURN(c.request_timeout, readSeconds(env, "request_timeout"));
  ZPS_ASSIGN_OR_RETURN(c.shutdown_linger, readSeconds(env, "shutdown_linger"));
  // ps-lite treats 0 as "heartbeats off"; we keep them on and read 0 as "use the default".
  if (c.heartbeat_interval.count() == 0) c.heartbeat_interval = Config{}.heartbeat_interval;
  if (c.heartbeat_timeout.count() == 0) c.heartbeat_timeout = Config{}.heartbeat_timeout;
  if (c.heartbeat_timeout < 2 * c.heartbeat_interval)
    return InvalidArgument("heartbeat timeout (" + std::to_string(c.heartbeat_timeout.count()) +
                           " ms) must be at least twice the heartbeat interval (" +
                           std::to_string(c.heartbeat_interval.count()) + " ms); raise ZPS_HEARTBEAT_TIMEOUT");
  ZPS_ASSIGN_OR_RETURN(c.resend_timeout, readSeconds(env, "resend_timeout"));
  // ps-lite's PS_RESEND=1 (with PS_RESEND_TIMEOUT milliseconds) when ZPS_RESEND_TIMEOUT says nothing.
  if (c.resend_timeout.count() == 0 && !flagValue("resend_timeout")) {
    if (auto r = env("PS_RESEND"); r && trimSpace(*r) == "1") {
      ZPS_ASSIGN_OR_RETURN(long long ms, readInteger(env, "ps_resend_timeout"));
      c.resend_timeout = std::chrono::milliseconds(ms);
    }
  }
  return Status::OK();
}

// Local ranks: the rank's range depends on the size.
Status loadLocalRanks(const EnvLookup& env, Config& c) {
  ZPS_RETURN_IF_ERROR(readInto(&c.local_size, readInteger(env, "local_size")));
  ZPS_RETURN_IF_ERROR(readInto(&c.local_rank, readInteger(env, "local_rank")));
  if (c.local_rank >= c.local_size) {
    std::string source = settingText(env, *findSetting("local_rank"))->source;
    return InvalidArgument(source + "=" + std::to_string(c.local_rank) + " is not below the local size " +
                           std::to_string(c.local_size) + "; set ZPS_LOCAL_RANK to 0.." +
                           std::to_string(c.local_size - 1) + " or raise ZPS_LOCAL_SIZE");
  }
  ZPS_ASSIGN_OR_RETURN(c.shm_dir, readText(env, "shm_dir"));
  if (c.shm_dir.empty() || c.shm_dir[0] != '/')
    return InvalidArgument(settingText(env, *findSetting("shm_dir"))->source + "='" + c.shm_dir +
                           "' must be an absolute path, e.g. /dev/shm");
  ZPS_ASSIGN_OR_RETURN(c.local_reduce, readText(env, "local_reduce"));
  return Status::OK();
}

Status loadCompression(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(std::string compressor, readText(env, "compressor"));
  c.compressor = *compressorFromName(compressor);  // the table's choices are the compressors' names
  ZPS_ASSIGN_OR_RETURN(c.compress_ratio, readFraction(env, "compress_ratio"));
  ZPS_RETURN_IF_ERROR(readInto(&c.min_compress_bytes, readInteger(env, "min_compress_bytes")));
  return Status::OK();
}

// Partitions, priority, credit and pacing: a value the user set, or "auto" (then Config's one-host
// value stands until chooseScheduling sees the address book).
Status loadScheduling(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> partition, readIntegerOrAuto(env, "partition_bytes"));
  c.automatic.partition = !partition;
  if (partition) c.partition_bytes = static_cast<size_t>(*partition);
  ZPS_ASSIGN_OR_RETURN(const std::optional<bool> priority, readSwitchOrAuto(env, "priority"));
  c.automatic.priority = !priority;
  if (priority) c.priority = *priority;
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> credit, readIntegerOrAuto(env, "credit_bytes"));
  c.automatic.credit = !credit;
  c.credit_bytes = credit ? static_cast<size_t>(*credit) : c.partition_bytes;
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> pacing, readIntegerOrAuto(env, "push_pacing_bytes"));
  c.automatic.pacing = !pacing;
  c.automatic.pacing_follows_credit = pacing && *pacing < 0;
  c.push_pacing_bytes = !pacing ? 0 : *pacing < 0 ? 2 * c.credit_bytes : static_cast<size_t>(*pacing);
  return Status::OK();
}

}  // namespace

StatusOr<Config> loadConfig(const EnvLookup& env, std::optional<Role> role) {
  Config c;
  ZPS_RETURN_IF_ERROR(loadCluster(env, role, c));
  ZPS_RETURN_IF_ERROR(loadTimeLimits(env, c));
  ZPS_RETURN_IF_ERROR(loadScheduling(env, c));
  ZPS_RETURN_IF_ERROR(readInto(&c.server_engine_threads, readInteger(env, "server_engine_threads")));
  ZPS_RETURN_IF_ERROR(readInto(&c.max_message_bytes, readInteger(env, "max_message_bytes")));
  ZPS_RETURN_IF_ERROR(readInto(&c.fusion_bytes, readInteger(env, "fusion_bytes")));
  ZPS_ASSIGN_OR_RETURN(c.push_lane, readSwitch(env, "push_lane"));
  ZPS_ASSIGN_OR_RETURN(c.push_hints, readSwitch(env, "push_hints"));
  ZPS_RETURN_IF_ERROR(readInto(&c.checkpoint_every, readInteger(env, "checkpoint_every")));
  ZPS_ASSIGN_OR_RETURN(c.checkpoint_dir, readText(env, "checkpoint_dir"));
  ZPS_ASSIGN_OR_RETURN(c.enable_async, readSwitch(env, "enable_async"));
  ZPS_ASSIGN_OR_RETURN(c.server_engine, readText(env, "server_engine"));
  ZPS_RETURN_IF_ERROR(loadLocalRanks(env, c));
  ZPS_ASSIGN_OR_RETURN(c.test_faults, readText(env, "test_faults"));
  ZPS_ASSIGN_OR_RETURN(c.auth_token, readText(env, "auth_token"));
  ZPS_ASSIGN_OR_RETURN(c.auth_token_file, readText(env, "auth_token_file"));
  ZPS_ASSIGN_OR_RETURN(c.curve, readSwitch(env, "curve"));
  ZPS_ASSIGN_OR_RETURN(c.ipc, readSwitch(env, "ipc"));
  ZPS_ASSIGN_OR_RETURN(c.recovery, readSwitch(env, "recovery"));
  ZPS_ASSIGN_OR_RETURN(c.recovery_timeout, readSeconds(env, "recovery_timeout"));
  if (c.recovery_timeout.count() == 0) return InvalidArgument("ZPS_RECOVERY_TIMEOUT must be more than 0 seconds");
  // The hard ceiling is the machine's memory: a cap above it would never protect the server. Only a
  // server checks it, since workers may run on smaller machines with the same environment.
  const uint64_t memory = physicalMemoryBytes();
  ZPS_RETURN_IF_ERROR(readInto(&c.server_max_bytes, readInteger(env, "server_max_bytes")));
  if (c.server_max_bytes == 0) c.server_max_bytes = memory / 2;
  if (c.role == Role::kServer && c.server_max_bytes > memory)
    return InvalidArgument("ZPS_SERVER_MAX_BYTES=" + std::to_string(c.server_max_bytes) + " exceeds this machine's " +
                           std::to_string(memory) + " bytes of memory; set it lower, or 0 for half of the memory");
  ZPS_RETURN_IF_ERROR(readInto(&c.table_memory_bytes, readInteger(env, "table_memory_bytes")));
  ZPS_ASSIGN_OR_RETURN(c.table_row_format, readText(env, "table_row_format"));
  ZPS_RETURN_IF_ERROR(readInto(&c.table_checkpoint_increments, readInteger(env, "table_checkpoint_increments")));
  ZPS_RETURN_IF_ERROR(loadCompression(env, c));
  if (c.partition_bytes > c.max_message_bytes)
    return InvalidArgument("ZPS_PARTITION_BYTES (" + std::to_string(c.partition_bytes) +
                           ") exceeds ZPS_MAX_MESSAGE_BYTES (" + std::to_string(c.max_message_bytes) + ")");
  return c;
}

uint64_t physicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  uint64_t bytes =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : uint64_t{1} << 32;
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
