// The table of every process-wide setting (see setting.h). Adding a setting is adding a row here and
// reading it where it is used; `zps help env`, the flags and docs/configuration.md follow from the row
// (regenerate the docs with `cmake --build build --target configuration-docs`).
#include <string>

#include "ps/common/setting.h"

// Each row names only the fields it sets; the others keep setting.h's defaults (which GCC's
// -Wmissing-field-initializers would report once per row).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zps {
namespace {

using T = SettingType;

std::vector<Setting> makeTable() {
  const std::string cluster = "Cluster (every role)";
  const std::string ranks = "Ranks";
  const std::string timeouts = "Time limits and heartbeats";
  const std::string messages = "Messages and servers";
  const std::string checkpoints = "Checkpoints, recovery and asynchronous training";
  const std::string local = "Local ranks (several processes per worker node)";
  const std::string compression = "Gradient compression";
  const std::string security = "Security";
  const std::string observability = "Observability";
  const std::string testing = "Testing";
  return {
      // Cluster: the DMLC contract ps-lite, MXNet and BytePS users already set. Environment only.
      {.name = "role", .flag = false, .env = {"DMLC_ROLE"}, .type = T::kChoice,
       .choices = {"scheduler", "server", "worker"}, .noun = "a role",
       .help = "what this process is; worker programs (zps check, bench, train) run as workers",
       .group = cluster, .required = true},
      {.name = "root_uri", .flag = false, .env = {"DMLC_PS_ROOT_URI"}, .type = T::kText,
       .hint = "the scheduler's host name or IP, e.g. 10.0.0.1",
       .help = "the scheduler's host name or IP address (servers and workers need it)", .group = cluster},
      {.name = "root_port", .flag = false, .env = {"DMLC_PS_ROOT_PORT"}, .type = T::kInteger, .min = 1,
       .max = 65535, .hint = "the scheduler's TCP port, e.g. DMLC_PS_ROOT_PORT=9000",
       .help = "the scheduler's TCP port", .group = cluster, .required = true},
      {.name = "num_servers", .flag = false, .env = {"DMLC_NUM_SERVER"}, .type = T::kInteger, .min = 1,
       .max = 65535, .hint = "the number of server nodes, e.g. DMLC_NUM_SERVER=2",
       .help = "the number of server nodes in the job", .group = cluster, .required = true},
      {.name = "num_workers", .flag = false, .env = {"DMLC_NUM_WORKER"}, .type = T::kInteger, .min = 1,
       .max = 65535, .hint = "the number of worker nodes, e.g. DMLC_NUM_WORKER=2",
       .help = "the number of worker nodes in the job", .group = cluster, .required = true},
      {.name = "node_host", .flag = false, .env = {"DMLC_NODE_HOST"}, .type = T::kText,
       .help = "the address this node advertises to its peers (default: DMLC_INTERFACE's address, else "
               "the first non-loopback IPv4 address that is up, else 127.0.0.1)",
       .group = cluster},
      {.name = "bind_host", .env = {"ZPS_BIND_HOST"}, .type = T::kText,
       .help = "the address the scheduler's and a server's sockets listen on (default: DMLC_NODE_HOST when "
               "it is an IP address, else 0.0.0.0: every interface)",
       .group = cluster},
      {.name = "interface", .flag = false, .env = {"DMLC_INTERFACE"}, .type = T::kText,
       .help = "a network interface whose IPv4 address this node advertises (when DMLC_NODE_HOST is not set)",
       .group = cluster},
      {.name = "node_port", .flag = false, .env = {"DMLC_PORT", "PORT"}, .type = T::kInteger, .default_text = "0",
       .min = 0, .max = 65535, .hint = "a TCP port, or 0 for any free port",
       .help = "the port a server or worker binds (DMLC_PORT wins over ps-lite's PORT); 0: any free port",
       .group = cluster},
      {.name = "verbose", .flag = false, .env = {"PS_VERBOSE"}, .type = T::kInteger, .default_text = "0",
       .min = 0, .max = 3, .hint = "0, 1 or 2",
       .help = "log detail: 1 adds connection logs, 2 per-message logs", .group = cluster,
       .blank_is_unset = false},
      {.name = "hostname", .flag = false, .env = {"HOSTNAME"}, .type = T::kText,
       .help = "this machine's name (default: gethostname); a trailing -N can give a worker its rank",
       .group = cluster},

      // Ranks: read by resolveRequestedRank (config.cc) in this order.
      {.name = "worker_rank", .flag = false, .env = {"DMLC_WORKER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"},
       .type = T::kInteger, .min = 0, .max = 1 << 20, .hint = "a rank from 0",
       .help = "the rank a worker asks for (Kubernetes Indexed Jobs and Volcano set the later names); "
               "when none is set, a trailing -N in the hostname, else the order of arrival",
       .group = ranks},
      {.name = "server_id", .env = {"ZPS_SERVER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"},
       .type = T::kInteger, .default_text = "-1", .min = -1, .max = 1 << 20, .hint = "a rank from 0",
       .help = "the rank a server asks for (-1: the order of arrival)", .group = ranks},

      // Time limits.
      {.name = "rendezvous_timeout", .env = {"ZPS_RENDEZVOUS_TIMEOUT"}, .type = T::kSeconds,
       .default_text = "300", .help = "seconds to wait for every node to register", .group = timeouts,
       .blank_is_unset = false},
      {.name = "rendezvous_log_interval", .env = {"ZPS_RENDEZVOUS_LOG_INTERVAL"}, .type = T::kSeconds,
       .default_text = "10", .help = "seconds between 'still waiting for' reports", .group = timeouts,
       .blank_is_unset = false},
      {.name = "connect_timeout", .env = {"ZPS_CONNECT_TIMEOUT"}, .type = T::kSeconds, .default_text = "120",
       .help = "seconds to keep resolving and connecting to the scheduler and servers", .group = timeouts,
       .blank_is_unset = false},
      {.name = "heartbeat_interval", .env = {"ZPS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_INTERVAL"},
       .type = T::kSeconds, .default_text = "5",
       .help = "seconds between heartbeats (0: the default; heartbeats are never off)", .group = timeouts,
       .blank_is_unset = false},
      {.name = "heartbeat_timeout", .env = {"ZPS_HEARTBEAT_TIMEOUT", "PS_HEARTBEAT_TIMEOUT"},
       .type = T::kSeconds, .default_text = "30",
       .help = "seconds of silence before a node is dead; at least twice the interval (0: the default)",
       .group = timeouts, .blank_is_unset = false},
      {.name = "request_timeout", .env = {"ZPS_REQUEST_TIMEOUT"}, .type = T::kSeconds, .default_text = "300",
       .help = "seconds a worker waits for a push or pull reply", .group = timeouts, .blank_is_unset = false},
      {.name = "resend_timeout", .env = {"ZPS_RESEND_TIMEOUT"}, .type = T::kSeconds, .default_text = "0",
       .help = "seconds before a worker resends an unanswered request (0: never)", .group = timeouts,
       .blank_is_unset = false},
      {.name = "ps_resend", .flag = false, .env = {"PS_RESEND"}, .type = T::kText,
       .help = "ps-lite's switch: 1 resends after PS_RESEND_TIMEOUT when ZPS_RESEND_TIMEOUT is 0",
       .group = timeouts},
      {.name = "ps_resend_timeout", .flag = false, .env = {"PS_RESEND_TIMEOUT"}, .type = T::kInteger,
       .default_text = "1000", .min = 1, .max = 3600000, .hint = "milliseconds, e.g. 1000",
       .help = "ps-lite's resend time in milliseconds (with PS_RESEND=1)", .group = timeouts,
       .blank_is_unset = false},
      {.name = "shutdown_linger", .env = {"ZPS_SHUTDOWN_LINGER"}, .type = T::kSeconds, .default_text = "1",
       .help = "seconds to flush final messages before exit", .group = timeouts, .blank_is_unset = false},

      // Messages and servers.
      {.name = "partition_bytes", .env = {"ZPS_PARTITION_BYTES"}, .type = T::kInteger,
       .default_text = "4194304", .min = 64, .max = int64_t{1} << 30,
       .help = "tensors are cut into partitions of this size (at most ZPS_MAX_MESSAGE_BYTES)",
       .group = messages, .blank_is_unset = false},
      {.name = "max_message_bytes", .env = {"ZPS_MAX_MESSAGE_BYTES"}, .type = T::kInteger,
       .default_text = "1073741824", .min = 4096, .max = int64_t{1} << 34,
       .help = "largest frame a peer may send (ZMQ_MAXMSGSIZE)", .group = messages, .blank_is_unset = false},
      {.name = "server_engine", .env = {"ZPS_SERVER_ENGINE"}, .type = T::kChoice, .default_text = "auto",
       .choices = {"auto", "cpu", "cuda"}, .noun = "an engine",
       .help = "server summation engine: auto (CUDA when a usable GPU is present), cpu or cuda",
       .group = messages},
      {.name = "server_engine_threads", .env = {"ZPS_SERVER_ENGINE_THREADS"}, .type = T::kInteger,
       .default_text = "2", .min = 1, .max = 256, .help = "summation threads per server", .group = messages,
       .blank_is_unset = false},
      {.name = "server_max_bytes", .env = {"ZPS_SERVER_MAX_BYTES"}, .type = T::kInteger, .default_text = "0",
       .min = 0, .max = int64_t{1} << 50,
       .help = "bytes a server may hold for keys and table rows, at most the machine's memory (0: half of "
               "the memory)",
       .group = messages, .blank_is_unset = false},

      // Checkpoints, recovery, asynchronous training.
      {.name = "checkpoint_dir", .env = {"ZPS_CHECKPOINT_DIR"}, .type = T::kText,
       .help = "folder for checkpoints (servers' shards, worker 0's model); empty: no checkpoints",
       .group = checkpoints},
      {.name = "checkpoint_every", .env = {"ZPS_CHECKPOINT_EVERY"}, .type = T::kInteger, .default_text = "0",
       .min = 0, .max = int64_t{1} << 40, .help = "steps between checkpoints (0: every epoch end)",
       .group = checkpoints, .blank_is_unset = false},
      {.name = "recovery", .env = {"ZPS_RECOVERY"}, .type = T::kSwitch, .default_text = "0",
       .help = "survive a lost node: hold its rank for a replacement and roll back to the latest checkpoint",
       .group = checkpoints},
      {.name = "recovery_timeout", .env = {"ZPS_RECOVERY_TIMEOUT"}, .type = T::kSeconds,
       .default_text = "300",
       .help = "seconds the scheduler holds a lost node's rank before it fails the job (more than 0)",
       .group = checkpoints, .blank_is_unset = false},
      {.name = "enable_async", .env = {"ZPS_ENABLE_ASYNC", "BYTEPS_ENABLE_ASYNC"}, .type = T::kSwitch,
       .default_text = "0", .help = "asynchronous training: servers apply each push at once",
       .group = checkpoints},

      // Local ranks.
      {.name = "local_size", .env = {"ZPS_LOCAL_SIZE", "BYTEPS_LOCAL_SIZE"}, .type = T::kInteger,
       .default_text = "1", .min = 1, .max = 1024, .hint = "the number of processes per node, e.g. 8",
       .help = "processes per worker node (one per GPU); 1: no local reduction", .group = local},
      {.name = "local_rank", .env = {"ZPS_LOCAL_RANK", "BYTEPS_LOCAL_RANK"}, .type = T::kInteger,
       .default_text = "0", .min = 0, .max = 1023, .hint = "this process's index on its node, from 0",
       .help = "this process's index on its worker node, below the local size", .group = local},
      {.name = "local_reduce", .env = {"ZPS_LOCAL_REDUCE"}, .type = T::kChoice, .default_text = "auto",
       .choices = {"auto", "shm", "nccl"}, .noun = "a local reduction backend",
       .help = "how a node's local ranks reduce: auto (NCCL for GPU tensors, shared memory for host "
               "tensors), shm or nccl",
       .group = local},
      {.name = "shm_dir", .env = {"ZPS_SHM_DIR"}, .type = T::kText, .default_text = "/dev/shm",
       .help = "folder (an absolute path) for the local reducer's shared-memory segments", .group = local},

      // Compression.
      {.name = "compressor", .env = {"ZPS_COMPRESSOR"}, .type = T::kChoice, .default_text = "none",
       .choices = {"none", "fp16", "topk", "randomk"}, .noun = "a compressor",
       .help = "compression of float32 tensor pushes", .group = compression},
      {.name = "compress_ratio", .env = {"ZPS_COMPRESS_RATIO"}, .type = T::kFraction, .default_text = "0.01",
       .help = "share of each partition's elements topk and randomk send per round", .group = compression,
       .blank_is_unset = false},
      {.name = "min_compress_bytes", .env = {"ZPS_MIN_COMPRESS_BYTES"}, .type = T::kInteger,
       .default_text = "16384", .min = 0, .max = int64_t{1} << 40,
       .help = "ZPS_COMPRESSOR leaves smaller tensors dense", .group = compression, .blank_is_unset = false},

      // Security: environment only, so that secrets never appear in a process list.
      {.name = "auth_token", .flag = false, .env = {"ZPS_AUTH_TOKEN"}, .type = T::kText,
       .help = "shared secret every node presents when it registers (never logged)", .group = security},
      {.name = "auth_token_file", .flag = false, .env = {"ZPS_AUTH_TOKEN_FILE"}, .type = T::kText,
       .help = "file holding the shared secret (wins over ZPS_AUTH_TOKEN)", .group = security},
      {.name = "curve", .flag = false, .env = {"ZPS_CURVE"}, .type = T::kSwitch, .default_text = "0",
       .help = "1: encrypt every connection (CurveZMQ); needs an auth token", .group = security},

      // Observability (ps/node/observability.cc).
      {.name = "metrics_port", .env = {"ZPS_METRICS_PORT"}, .type = T::kInteger, .default_text = "0",
       .min = 0, .max = 65535, .hint = "a free TCP port for /metrics, or 0 for none",
       .help = "serve Prometheus /metrics (and on the scheduler the dashboard and /api/status) on this "
               "TCP port; 0: off",
       .group = observability},
      {.name = "metrics_host", .env = {"ZPS_METRICS_HOST"}, .type = T::kText,
       .help = "the address the /metrics endpoint listens on (default: as ZPS_BIND_HOST; 127.0.0.1: this "
               "machine only)",
       .group = observability},
      {.name = "trace_on", .env = {"ZPS_TRACE_ON"}, .type = T::kSwitch, .default_text = "0",
       .help = "write a Chrome trace-event timeline of push, sum and pull", .group = observability},
      {.name = "trace_start_step", .env = {"ZPS_TRACE_START_STEP"}, .type = T::kInteger, .default_text = "1",
       .min = 1, .max = int64_t{1} << 50, .hint = "a step from 1",
       .help = "first round (training step) in the timeline", .group = observability},
      {.name = "trace_end_step", .env = {"ZPS_TRACE_END_STEP"}, .type = T::kInteger, .default_text = "20",
       .min = 1, .max = int64_t{1} << 50, .hint = "a step from 1",
       .help = "last round (training step) in the timeline", .group = observability},
      {.name = "trace_dir", .env = {"ZPS_TRACE_DIR"}, .type = T::kText, .default_text = "zps-trace",
       .help = "folder for the timeline files (<role>-<rank>.json)", .group = observability},

      // Testing: fault injection, never for production jobs.
      {.name = "test_faults", .flag = false, .env = {"ZPS_TEST_FAULTS"}, .type = T::kText,
       .help = "inject transport faults (tests only; see parseFaultInjection in ps/transport/transport.h)",
       .group = testing},
      {.name = "test_local_crash", .flag = false, .env = {"ZPS_TEST_LOCAL_CRASH"}, .type = T::kText,
       .help = "make a local rank crash at a chosen point (tests of the local reducer only)", .group = testing},
  };
}

}  // namespace

const std::vector<Setting>& settingsTable() {
  static const std::vector<Setting> table = makeTable();
  return table;
}

}  // namespace zps
