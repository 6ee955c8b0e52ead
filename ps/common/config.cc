#include "ps/common/config.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

namespace zps {
namespace {

// The cluster: role, counts, the scheduler's address and this node's, its requested rank.
Status loadCluster(const EnvLookup& env, std::optional<Role> role, Config& c) {
  if (role) {
    c.role = *role;
  } else {
    ZPS_ASSIGN_OR_RETURN(std::string r, readText(env, settings::kRole));
    c.role = r == "scheduler" ? Role::kScheduler : r == "server" ? Role::kServer : Role::kWorker;
  }
  ZPS_RETURN_IF_ERROR(readInto(&c.num_servers, env, settings::kNumServers));
  ZPS_RETURN_IF_ERROR(readInto(&c.num_workers, env, settings::kNumWorkers));
  ZPS_RETURN_IF_ERROR(readInto(&c.root_port, env, settings::kRootPort));
  ZPS_ASSIGN_OR_RETURN(c.root_uri, readText(env, settings::kRootUri));
  if (c.role != Role::kScheduler && c.root_uri.empty())
    return InvalidArgument("DMLC_PS_ROOT_URI is not set; set it to " + std::string(settings::kRootUri.hint));
  ZPS_RETURN_IF_ERROR(readInto(&c.verbose, env, settings::kVerbose));
  ZPS_RETURN_IF_ERROR(readInto(&c.node_port, env, settings::kNodePort));
  ZPS_ASSIGN_OR_RETURN(c.node_host, advertisedHost(env));
  ZPS_ASSIGN_OR_RETURN(c.bind_host, bindHostFrom(env));
  ZPS_ASSIGN_OR_RETURN(c.hostname, hostName(env));
  int n = c.role == Role::kWorker ? c.num_workers : c.num_servers;
  return resolveRequestedRank(env, c.role, n, c.hostname, &c.requested_rank, &c.rank_source);
}

Status loadTimeLimits(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(c.rendezvous_timeout, readSeconds(env, settings::kRendezvousTimeout));
  ZPS_ASSIGN_OR_RETURN(c.job_end_timeout, readSeconds(env, settings::kJobEndTimeout));
  ZPS_ASSIGN_OR_RETURN(c.rendezvous_log_interval, readSeconds(env, settings::kRendezvousLogInterval));
  ZPS_ASSIGN_OR_RETURN(c.connect_timeout, readSeconds(env, settings::kConnectTimeout));
  ZPS_ASSIGN_OR_RETURN(c.heartbeat_interval, readSeconds(env, settings::kHeartbeatInterval));
  ZPS_ASSIGN_OR_RETURN(c.heartbeat_timeout, readSeconds(env, settings::kHeartbeatTimeout));
  ZPS_ASSIGN_OR_RETURN(c.request_timeout, readSeconds(env, settings::kRequestTimeout));
  ZPS_ASSIGN_OR_RETURN(c.shutdown_linger, readSeconds(env, settings::kShutdownLinger));
  // ps-lite treats 0 as "heartbeats off"; we keep them on and read 0 as "use the default".
  if (c.heartbeat_interval.count() == 0) c.heartbeat_interval = secondsDefault(settings::kHeartbeatInterval);
  if (c.heartbeat_timeout.count() == 0) c.heartbeat_timeout = secondsDefault(settings::kHeartbeatTimeout);
  if (c.heartbeat_timeout < 2 * c.heartbeat_interval)
    return InvalidArgument("heartbeat timeout (" + std::to_string(c.heartbeat_timeout.count()) +
                           " ms) must be at least twice the heartbeat interval (" +
                           std::to_string(c.heartbeat_interval.count()) + " ms); raise ZPS_HEARTBEAT_TIMEOUT");
  ZPS_ASSIGN_OR_RETURN(c.resend_timeout, readSeconds(env, settings::kResendTimeout));
  // ps-lite's PS_RESEND=1 (with PS_RESEND_TIMEOUT milliseconds) when ZPS_RESEND_TIMEOUT says nothing.
  if (c.resend_timeout.count() == 0 && !flagValue(std::string(settings::kResendTimeout.name))) {
    ZPS_ASSIGN_OR_RETURN(std::string ps_resend, readText(env, settings::kPsResend));
    if (ps_resend == "1") {
      ZPS_ASSIGN_OR_RETURN(long long ms, readInteger(env, settings::kPsResendTimeout));
      c.resend_timeout = std::chrono::milliseconds(ms);
    }
  }
  return Status::OK();
}

// Local ranks: the rank's range depends on the size.
Status loadLocalRanks(const EnvLookup& env, Config& c) {
  ZPS_RETURN_IF_ERROR(readInto(&c.local_size, env, settings::kLocalSize));
  ZPS_RETURN_IF_ERROR(readInto(&c.local_rank, env, settings::kLocalRank));
  if (c.local_rank >= c.local_size) {
    std::string source = settingText(env, settings::kLocalRank)->source;
    return InvalidArgument(source + "=" + std::to_string(c.local_rank) + " is not below the local size " +
                           std::to_string(c.local_size) + "; set ZPS_LOCAL_RANK to 0.." +
                           std::to_string(c.local_size - 1) + " or raise ZPS_LOCAL_SIZE");
  }
  ZPS_ASSIGN_OR_RETURN(c.shm_dir, readText(env, settings::kShmDir));
  if (c.shm_dir.empty() || c.shm_dir[0] != '/')
    return InvalidArgument(settingText(env, settings::kShmDir)->source + "='" + c.shm_dir +
                           "' must be an absolute path, e.g. /dev/shm");
  ZPS_ASSIGN_OR_RETURN(c.local_reduce, readText(env, settings::kLocalReduce));
  return Status::OK();
}

Status loadCompression(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(std::string compressor, readText(env, settings::kCompressor));
  c.compressor = *compressorFromName(compressor);  // the table's choices are the compressors' names
  ZPS_ASSIGN_OR_RETURN(c.compress_ratio, readFraction(env, settings::kCompressRatio));
  ZPS_RETURN_IF_ERROR(readInto(&c.min_compress_bytes, env, settings::kMinCompressBytes));
  return Status::OK();
}

// Partitions, priority, credit and pacing: a value the user set, or "auto" (then Config's one-host
// value stands until chooseScheduling sees the address book).
Status loadScheduling(const EnvLookup& env, Config& c) {
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> partition, readIntegerOrAuto(env, settings::kPartitionBytes));
  c.automatic.partition = !partition;
  if (partition) c.partition_bytes = static_cast<size_t>(*partition);
  ZPS_ASSIGN_OR_RETURN(const std::optional<bool> priority, readSwitchOrAuto(env, settings::kPriority));
  c.automatic.priority = !priority;
  if (priority) c.priority = *priority;
  ZPS_ASSIGN_OR_RETURN(const std::optional<bool> skip_zeros, readSwitchOrAuto(env, settings::kSkipZeros));
  c.automatic.skip_zeros = !skip_zeros;
  if (skip_zeros) c.skip_zeros = *skip_zeros;
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> credit, readIntegerOrAuto(env, settings::kCreditBytes));
  c.automatic.credit = !credit;
  c.credit_bytes = credit ? static_cast<size_t>(*credit) : c.partition_bytes;
  ZPS_ASSIGN_OR_RETURN(const std::optional<long long> pacing, readIntegerOrAuto(env, settings::kPushPacingBytes));
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
  ZPS_RETURN_IF_ERROR(readInto(&c.server_engine_threads, env, settings::kServerEngineThreads));
  ZPS_RETURN_IF_ERROR(readInto(&c.max_message_bytes, env, settings::kMaxMessageBytes));
  ZPS_RETURN_IF_ERROR(readInto(&c.fusion_bytes, env, settings::kFusionBytes));
  ZPS_ASSIGN_OR_RETURN(c.push_lane, readSwitch(env, settings::kPushLane));
  ZPS_ASSIGN_OR_RETURN(c.push_hints, readSwitch(env, settings::kPushHints));
  ZPS_RETURN_IF_ERROR(readInto(&c.checkpoint_every, env, settings::kCheckpointEvery));
  ZPS_ASSIGN_OR_RETURN(c.checkpoint_dir, readText(env, settings::kCheckpointDir));
  ZPS_ASSIGN_OR_RETURN(c.enable_async, readSwitch(env, settings::kEnableAsync));
  ZPS_ASSIGN_OR_RETURN(c.server_engine, readText(env, settings::kServerEngine));
  ZPS_RETURN_IF_ERROR(loadLocalRanks(env, c));
  ZPS_ASSIGN_OR_RETURN(c.test_faults, readText(env, settings::kTestFaults));
  ZPS_ASSIGN_OR_RETURN(c.auth_token, readText(env, settings::kAuthToken));
  ZPS_ASSIGN_OR_RETURN(c.auth_token_file, readText(env, settings::kAuthTokenFile));
  ZPS_ASSIGN_OR_RETURN(c.curve, readSwitch(env, settings::kCurve));
  ZPS_ASSIGN_OR_RETURN(c.ipc, readSwitch(env, settings::kIpc));
  ZPS_ASSIGN_OR_RETURN(c.recovery, readSwitch(env, settings::kRecovery));
  ZPS_ASSIGN_OR_RETURN(c.recovery_timeout, readSeconds(env, settings::kRecoveryTimeout));
  if (c.recovery_timeout.count() == 0) return InvalidArgument("ZPS_RECOVERY_TIMEOUT must be more than 0 seconds");
  // The hard ceiling is the machine's memory: a cap above it would never protect the server. Only a
  // server checks it, since workers may run on smaller machines with the same environment.
  const uint64_t memory = physicalMemoryBytes();
  ZPS_RETURN_IF_ERROR(readInto(&c.server_max_bytes, env, settings::kServerMaxBytes));
  if (c.server_max_bytes == 0) c.server_max_bytes = memory / 2;
  if (c.role == Role::kServer && c.server_max_bytes > memory)
    return InvalidArgument("ZPS_SERVER_MAX_BYTES=" + std::to_string(c.server_max_bytes) + " exceeds this machine's " +
                           std::to_string(memory) + " bytes of memory; set it lower, or 0 for half of the memory");
  ZPS_RETURN_IF_ERROR(readInto(&c.table_memory_bytes, env, settings::kTableMemoryBytes));
  ZPS_ASSIGN_OR_RETURN(c.table_row_format, readText(env, settings::kTableRowFormat));
  ZPS_RETURN_IF_ERROR(readInto(&c.table_checkpoint_increments, env, settings::kTableCheckpointIncrements));
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
