// Settings of the cluster (the DMLC contract), the ranks nodes ask for, time limits and heartbeats
// (one constant each; see ps/common/settings.h).
#pragma once

#include "ps/common/setting.h"

// Each constant names only the fields it sets; the others keep setting.h's defaults (which GCC's
// -Wmissing-field-initializers would report once per constant).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zps::settings {

// The headings these settings appear under in help and docs.
inline constexpr std::string_view kGroupCluster = "Cluster (every role)";
inline constexpr std::string_view kGroupRanks = "Ranks";
inline constexpr std::string_view kGroupTimeouts = "Time limits and heartbeats";

// Cluster: the DMLC contract ps-lite, MXNet and BytePS users already set. Environment only.
inline constexpr Setting kRole{
    .name = "role",
    .flag = false,
    .env = {"DMLC_ROLE"},
    .type = SettingType::kChoice,
    .choices = {"scheduler", "server", "worker"},
    .noun = "a role",
    .help = "what this process is; worker programs (zps check, bench, train) run as workers",
    .group = kGroupCluster,
    .required = true,
};
inline constexpr Setting kRootUri{
    .name = "root_uri",
    .flag = false,
    .env = {"DMLC_PS_ROOT_URI"},
    .type = SettingType::kText,
    .hint = "the scheduler's host name or IP, e.g. 10.0.0.1",
    .help = "the scheduler's host name or IP address (servers and workers need it)",
    .group = kGroupCluster,
};
inline constexpr Setting kRootPort{
    .name = "root_port",
    .flag = false,
    .env = {"DMLC_PS_ROOT_PORT"},
    .type = SettingType::kInteger,
    .min = 1,
    .max = 65535,
    .hint = "the scheduler's TCP port, e.g. DMLC_PS_ROOT_PORT=9000",
    .help = "the scheduler's TCP port",
    .group = kGroupCluster,
    .required = true,
};
inline constexpr Setting kNumServers{
    .name = "num_servers",
    .flag = false,
    .env = {"DMLC_NUM_SERVER"},
    .type = SettingType::kInteger,
    .min = 1,
    .max = 65535,
    .hint = "the number of server nodes, e.g. DMLC_NUM_SERVER=2",
    .help = "the number of server nodes in the job",
    .group = kGroupCluster,
    .required = true,
};
inline constexpr Setting kNumWorkers{
    .name = "num_workers",
    .flag = false,
    .env = {"DMLC_NUM_WORKER"},
    .type = SettingType::kInteger,
    .min = 1,
    .max = 65535,
    .hint = "the number of worker nodes, e.g. DMLC_NUM_WORKER=2",
    .help = "the number of worker nodes in the job",
    .group = kGroupCluster,
    .required = true,
};
inline constexpr Setting kNodeHost{
    .name = "node_host",
    .flag = false,
    .env = {"DMLC_NODE_HOST"},
    .type = SettingType::kText,
    .help =
        "the address this node advertises to its peers (default: DMLC_INTERFACE's address, else "
        "the first non-loopback IPv4 address that is up, else 127.0.0.1)",
    .group = kGroupCluster,
};
inline constexpr Setting kBindHost{
    .name = "bind_host",
    .env = {"ZPS_BIND_HOST"},
    .type = SettingType::kText,
    .help =
        "the address the scheduler's and a server's sockets listen on (default: DMLC_NODE_HOST when "
        "it is an IP address, else 0.0.0.0: every interface)",
    .group = kGroupCluster,
};
inline constexpr Setting kInterface{
    .name = "interface",
    .flag = false,
    .env = {"DMLC_INTERFACE"},
    .type = SettingType::kText,
    .help = "a network interface whose IPv4 address this node advertises (when DMLC_NODE_HOST is not set)",
    .group = kGroupCluster,
};
inline constexpr Setting kNodePort{
    .name = "node_port",
    .flag = false,
    .env = {"DMLC_PORT", "PORT"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 65535,
    .hint = "a TCP port, or 0 for any free port",
    .help = "the port a server or worker binds (DMLC_PORT wins over ps-lite's PORT); 0: any free port",
    .group = kGroupCluster,
};
inline constexpr Setting kVerbose{
    .name = "verbose",
    .flag = false,
    .env = {"PS_VERBOSE"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 3,
    .hint = "0, 1 or 2",
    .help = "log detail: 1 adds connection logs, 2 per-message logs",
    .group = kGroupCluster,
    .blank_is_unset = false,
};
inline constexpr Setting kHostname{
    .name = "hostname",
    .flag = false,
    .env = {"HOSTNAME"},
    .type = SettingType::kText,
    .help = "this machine's name (default: gethostname); a trailing -N can give a worker its rank",
    .group = kGroupCluster,
};

// Ranks: read by resolveRequestedRank (config.cc) in this order.
inline constexpr Setting kWorkerRank{
    .name = "worker_rank",
    .flag = false,
    .env = {"DMLC_WORKER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"},
    .type = SettingType::kInteger,
    .min = 0,
    .max = 1 << 20,
    .hint = "a rank from 0",
    .help =
        "the rank a worker asks for (Kubernetes Indexed Jobs and Volcano set the later names); "
        "when none is set, a trailing -N in the hostname, else the order of arrival",
    .group = kGroupRanks,
};
inline constexpr Setting kServerId{
    .name = "server_id",
    .env = {"ZPS_SERVER_ID", "JOB_COMPLETION_INDEX", "VC_TASK_INDEX"},
    .type = SettingType::kInteger,
    .default_text = "-1",
    .min = -1,
    .max = 1 << 20,
    .hint = "a rank from 0",
    .help = "the rank a server asks for (-1: the order of arrival)",
    .group = kGroupRanks,
};

// Time limits.
inline constexpr Setting kRendezvousTimeout{
    .name = "rendezvous_timeout",
    .env = {"ZPS_RENDEZVOUS_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "300",
    .help = "seconds to wait for every node to register",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kJobEndTimeout{
    .name = "job_end_timeout",
    .env = {"ZPS_JOB_END_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "86400",
    .help = "seconds a worker that finished waits for the others to finish (the job's end)",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kRendezvousLogInterval{
    .name = "rendezvous_log_interval",
    .env = {"ZPS_RENDEZVOUS_LOG_INTERVAL"},
    .type = SettingType::kSeconds,
    .default_text = "10",
    .help = "seconds between 'still waiting for' reports",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kConnectTimeout{
    .name = "connect_timeout",
    .env = {"ZPS_CONNECT_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "120",
    .help = "seconds to keep resolving and connecting to the scheduler and servers",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kHeartbeatInterval{
    .name = "heartbeat_interval",
    .env = {"ZPS_HEARTBEAT_INTERVAL", "PS_HEARTBEAT_INTERVAL"},
    .type = SettingType::kSeconds,
    .default_text = "5",
    .help = "seconds between heartbeats (0: the default; heartbeats are never off)",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kHeartbeatTimeout{
    .name = "heartbeat_timeout",
    .env = {"ZPS_HEARTBEAT_TIMEOUT", "PS_HEARTBEAT_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "30",
    .help = "seconds of silence before a node is dead; at least twice the interval (0: the default)",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kRequestTimeout{
    .name = "request_timeout",
    .env = {"ZPS_REQUEST_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "300",
    .help = "seconds a worker waits for a push or pull reply",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kResendTimeout{
    .name = "resend_timeout",
    .env = {"ZPS_RESEND_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "0",
    .help = "seconds before a worker resends an unanswered request (0: never)",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kPsResend{
    .name = "ps_resend",
    .flag = false,
    .env = {"PS_RESEND"},
    .type = SettingType::kText,
    .help = "ps-lite's switch: 1 resends after PS_RESEND_TIMEOUT when ZPS_RESEND_TIMEOUT is 0",
    .group = kGroupTimeouts,
};
inline constexpr Setting kPsResendTimeout{
    .name = "ps_resend_timeout",
    .flag = false,
    .env = {"PS_RESEND_TIMEOUT"},
    .type = SettingType::kInteger,
    .default_text = "1000",
    .min = 1,
    .max = 3600000,
    .hint = "milliseconds, e.g. 1000",
    .help = "ps-lite's resend time in milliseconds (with PS_RESEND=1)",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};
inline constexpr Setting kShutdownLinger{
    .name = "shutdown_linger",
    .env = {"ZPS_SHUTDOWN_LINGER"},
    .type = SettingType::kSeconds,
    .default_text = "1",
    .help = "seconds to flush final messages before exit",
    .group = kGroupTimeouts,
    .blank_is_unset = false,
};

}  // namespace zps::settings

#pragma GCC diagnostic pop
