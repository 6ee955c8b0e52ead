// Config: the settings a zps node runs with, read from the table of settings (setting.h): the DMLC
// environment (compatible with ps-lite, MXNet and BytePS) and our own ZPS_* settings. Most ZPS_* settings
// are also a flag of the same name in lower case without the prefix (ZPS_RENDEZVOUS_TIMEOUT <->
// --rendezvous_timeout); a flag given on the command line wins over the environment. Values are hostile:
// each is validated and a bad one yields an InvalidArgument whose message says what to change (the
// binary prints it and exits 2). `zps help env` and docs/configuration.md list them all.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ps/common/node_identity.h"
#include "ps/common/setting.h"
#include "ps/common/settings.h"
#include "zps/compression.h"
#include "zps/status.h"

namespace zps {

// ZPS_LOCAL_SIZE's upper bound (the local group's shared segment has a slot per rank); servers hold
// the local sizes workers declare for their tables to it too.
constexpr int kMaxLocalSize = static_cast<int>(settings::kLocalSize.max);
static_assert(settings::kLocalRank.max == kMaxLocalSize - 1);

// ZPS_PARTITION_BYTES's value on one host, where "auto" starts (ps/node/job_layout.h).
constexpr size_t kOneHostPartitionBytes = size_t{4} << 20;

// The defaults of Config's fields are the settings' defaults (settings.h). Where a setting's default is
// "auto", the field holds the one-host choice until chooseScheduling (ps/node/job_layout.h) has seen
// the job's layout.
struct Config {
  Role role = Role::kWorker;
  std::string root_uri;               // DMLC_PS_ROOT_URI: scheduler host name or IP
  int root_port = 0;                  // DMLC_PS_ROOT_PORT
  int num_servers = 0;                // DMLC_NUM_SERVER
  int num_workers = 0;                // DMLC_NUM_WORKER
  std::string node_host;              // the address this node advertises (DMLC_NODE_HOST, DMLC_INTERFACE, detected)
  std::string bind_host = "0.0.0.0";  // the address the scheduler's and a server's sockets bind (bindHostFrom)
  int node_port = integerDefault(settings::kNodePort);  // PORT / DMLC_PORT; 0 = any free port
  int verbose = integerDefault(settings::kVerbose);     // PS_VERBOSE

  // Requested rank: -1 = assigned by arrival order. rank_source names where it came from.
  int requested_rank = -1;
  std::string rank_source = "arrival order";
  std::string hostname;

  std::chrono::milliseconds rendezvous_timeout = secondsDefault(settings::kRendezvousTimeout);
  // How long a worker that finished waits for the rest (a rank 0 alone evaluating or saving at the end
  // may take hours): the job's end, not a rendezvous.
  std::chrono::milliseconds job_end_timeout = secondsDefault(settings::kJobEndTimeout);
  std::chrono::milliseconds rendezvous_log_interval = secondsDefault(settings::kRendezvousLogInterval);
  std::chrono::milliseconds connect_timeout = secondsDefault(settings::kConnectTimeout);
  std::chrono::milliseconds heartbeat_interval = secondsDefault(settings::kHeartbeatInterval);
  std::chrono::milliseconds heartbeat_timeout = secondsDefault(settings::kHeartbeatTimeout);
  std::chrono::milliseconds request_timeout = secondsDefault(settings::kRequestTimeout);
  std::chrono::milliseconds shutdown_linger = secondsDefault(settings::kShutdownLinger);
  size_t partition_bytes = kOneHostPartitionBytes;
  int server_engine_threads = integerDefault(settings::kServerEngineThreads);
  size_t max_message_bytes = integerDefault(settings::kMaxMessageBytes);
  // ZPS_IPC: workers move their links to servers on the same host to the servers' ipc:// sockets.
  bool ipc = switchDefault(settings::kIpc);
  // Priority scheduling (worker/scheduling/push_scheduler.h): ZPS_PRIORITY gives every dense tensor its
  // declaration index as priority; ZPS_CREDIT_BYTES bounds the scheduled pushes in flight per server.
  bool priority = false;
  // ZPS_SKIP_ZEROS: float32 pushes and sums travel nonzero-encoded where that saves enough
  // (kernels/nonzero_encoding.h); "auto" (the one-host value, off) until chooseScheduling sees the book.
  bool skip_zeros = false;
  // ZPS_FUSION_BYTES (0: off): requests for smaller partitions that are ready together for one server
  // travel as one CMD_FUSED message of at most this many payload bytes (worker/scheduling/fusion.h).
  size_t fusion_bytes = integerDefault(settings::kFusionBytes);
  size_t credit_bytes = kOneHostPartitionBytes;
  // ZPS_PUSH_LANE: with priority scheduling, a second connection to each server carries the scheduled pushes,
  // so that their acknowledgements do not queue behind the sums on the first (worker/server_links.h).
  // On by default: it measured faster on the emulated cluster (docs/performance.md); a job that
  // schedules no push never opens the lanes.
  bool push_lane = switchDefault(settings::kPushLane);
  // ZPS_PUSH_HINTS: with priority scheduling, a worker's scheduled pushes ask for the rounds that wait
  // for its push alone, and it sends its queued pushes of those first (worker/scheduling/push_scheduler.h).
  bool push_hints = switchDefault(settings::kPushHints);
  // ZPS_PUSH_PACING_BYTES: a server holds back the push acknowledgements of a worker this far ahead of
  // the slowest one pushing to it (server/scheduling/push_pacer.h); 0 (the default): off; the setting's -1 is
  // twice credit_bytes. Off by default: it paid on the emulated cluster's slow links, and cost a few
  // percent where the CPUs are the limit (loopback; docs/performance.md).
  size_t push_pacing_bytes = 0;
  // The scheduling settings left to zps ("auto", their default). Until the address book arrives the
  // fields above hold the one-host choices; chooseScheduling (ps/node/job_layout.h) then sets these
  // from where every node runs. pacing_follows_credit: ZPS_PUSH_PACING_BYTES=-1, twice the credit
  // whatever the credit becomes.
  struct Automatic {
    bool partition = false;
    bool priority = false;
    bool skip_zeros = false;
    bool credit = false;
    bool pacing = false;
    bool pacing_follows_credit = false;
  } automatic;

  std::string checkpoint_dir;  // ZPS_CHECKPOINT_DIR; empty = no checkpoints
  int64_t checkpoint_every =
      integerDefault(settings::kCheckpointEvery);  // ZPS_CHECKPOINT_EVERY steps; 0 = only at epoch ends and at the end
  bool enable_async = switchDefault(settings::kEnableAsync);  // ZPS_ENABLE_ASYNC (or BYTEPS_ENABLE_ASYNC)

  // A worker resends a request with no reply after this long (0 = never). ZPS_RESEND_TIMEOUT seconds,
  // or ps-lite's PS_RESEND=1 with PS_RESEND_TIMEOUT milliseconds.
  std::chrono::milliseconds resend_timeout = secondsDefault(settings::kResendTimeout);
  std::string test_faults;  // ZPS_TEST_FAULTS, validated by parseFaultInjection (faulty_transport.h)

  // ZPS_SERVER_ENGINE: "auto" (CUDA when a usable GPU is present, else CPU), "cpu" or "cuda".
  std::string server_engine{settings::kServerEngine.default_text};
  // Worker nodes with several processes (one per GPU): ZPS_LOCAL_RANK / ZPS_LOCAL_SIZE, or BytePS's
  // BYTEPS_LOCAL_RANK / BYTEPS_LOCAL_SIZE. local_size 1 means no local reduction.
  int local_rank = integerDefault(settings::kLocalRank);
  int local_size = integerDefault(settings::kLocalSize);
  std::string shm_dir{settings::kShmDir.default_text};  // ZPS_SHM_DIR: where the local reducer's private folder goes
  // ZPS_LOCAL_REDUCE: how a node's local ranks reduce. "auto": NCCL for tensors in GPU memory,
  // shared memory for host tensors; "shm": shared memory only (GPU tensors are refused); "nccl":
  // NCCL for every tensor (host tensors are copied to the GPU first).
  std::string local_reduce{settings::kLocalReduce.default_text};

  std::string auth_token;                        // ZPS_AUTH_TOKEN (never logged)
  std::string auth_token_file;                   // ZPS_AUTH_TOKEN_FILE (wins over ZPS_AUTH_TOKEN)
  bool curve = switchDefault(settings::kCurve);  // ZPS_CURVE=1: encrypt every connection (CurveZMQ)

  // ZPS_RECOVERY=1: a lost node's rank is held open for a replacement for ZPS_RECOVERY_TIMEOUT seconds
  // and the job rolls back to its latest checkpoint instead of failing (scheduler/scheduler.cc).
  bool recovery = switchDefault(settings::kRecovery);
  std::chrono::milliseconds recovery_timeout = secondsDefault(settings::kRecoveryTimeout);
  // ZPS_SERVER_MAX_BYTES: what one server may hold for keys and table rows; past it new keys and rows
  // are refused. Default: half of this machine's (or container's) memory.
  uint64_t server_max_bytes = integerDefault(settings::kServerMaxBytes);
  // Server tables (docs/tables.md): ZPS_TABLE_MEMORY_BYTES (0: no limit) before the least recently used
  // rows are evicted, ZPS_TABLE_ROW_FORMAT (float32, float16, bfloat16), and
  // ZPS_TABLE_CHECKPOINT_INCREMENTS: checkpoints written as increments after each full one.
  uint64_t table_memory_bytes = integerDefault(settings::kTableMemoryBytes);
  std::string table_row_format{settings::kTableRowFormat.default_text};
  uint32_t table_checkpoint_increments = integerDefault(settings::kTableCheckpointIncrements);

  // Gradient compression (include/zps/compression.h): the compressor of float32 tensors declared without
  // one, the share of elements topk/randomk send, and the smallest tensor ZPS_COMPRESSOR compresses.
  Compressor compressor = Compressor::kNone;                          // ZPS_COMPRESSOR
  double compress_ratio = fractionDefault(settings::kCompressRatio);  // ZPS_COMPRESS_RATIO, in (0, 1]
  static_assert(fractionDefault(settings::kCompressRatio) == kDefaultCompressRatio);
  size_t min_compress_bytes = integerDefault(settings::kMinCompressBytes);  // ZPS_MIN_COMPRESS_BYTES
};

// This machine's memory, or the container's limit (cgroup v2 memory.max) when that is lower.
uint64_t physicalMemoryBytes();

// Reads and validates the configuration of a process with the given role (taken from DMLC_ROLE when
// role is nullopt). Scheduler: needs root port and counts. Server/worker: also the root URI.
StatusOr<Config> loadConfig(const EnvLookup& env, std::optional<Role> role = std::nullopt);

// Applies --v from PS_VERBOSE and sends glog to stderr. Call once in main, after flag parsing.
void setupLogging(const char* argv0, int verbose);

// A duration as users write it in seconds, for messages: "30", "1.5", "0.25".
std::string secondsText(std::chrono::milliseconds d);

}  // namespace zps
