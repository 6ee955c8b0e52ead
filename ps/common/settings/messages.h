// Settings of messages and servers: partitions, fusion, priority scheduling, server engines and
// memory (one constant each; see ps/common/settings.h).
#pragma once

#include "ps/common/setting.h"

// Each constant names only the fields it sets; the others keep setting.h's defaults (which GCC's
// -Wmissing-field-initializers would report once per constant).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zps::settings {

// The headings these settings appear under in help and docs.
inline constexpr std::string_view kGroupMessages = "Messages and servers";

// Messages and servers.
inline constexpr Setting kPartitionBytes{
    .name = "partition_bytes",
    .env = {"ZPS_PARTITION_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "auto",
    .min = 64,
    .max = int64_t{1} << 30,
    .help =
        "tensors are cut into partitions of this size (at most ZPS_MAX_MESSAGE_BYTES); auto: 4194304 when "
        "every worker and server runs on one host, 65536 when the job spans hosts; set 262144-1048576 on links of "
        "10 Gbit/s or more, where 64 KiB partitions make more messages than the CPUs carry "
        "(docs/performance.md#defaults)",
    .group = kGroupMessages,
    .blank_is_unset = false,
    .accepts_auto = true,
};
inline constexpr Setting kMaxMessageBytes{
    .name = "max_message_bytes",
    .env = {"ZPS_MAX_MESSAGE_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "1073741824",
    .min = 4096,
    .max = int64_t{1} << 34,
    .help = "largest frame a peer may send (ZMQ_MAXMSGSIZE)",
    .group = kGroupMessages,
    .blank_is_unset = false,
};
inline constexpr Setting kIpc{
    .name = "ipc",
    .env = {"ZPS_IPC"},
    .type = SettingType::kSwitch,
    .default_text = "1",
    .help =
        "1: a worker's links to servers on its host move from TCP to the servers' ipc:// sockets, where "
        "frames of 16 KiB or more cross in shared memory; 0: they stay on TCP (on a server: it offers no "
        "ipc:// socket)",
    .group = kGroupMessages,
};
inline constexpr Setting kFusionBytes{
    .name = "fusion_bytes",
    .env = {"ZPS_FUSION_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "65536",
    .min = 0,
    .max = 262144,
    .help =
        "requests for partitions smaller than this that a worker has ready for one server together (one "
        "call's partitions, or pushes the priority scheduler releases at once) travel as one message of at "
        "most this many payload bytes; 0: every request alone, only to compare (docs/performance.md#fusion)",
    .group = kGroupMessages,
    .blank_is_unset = false,
};
inline constexpr Setting kPriority{
    .name = "priority",
    .env = {"ZPS_PRIORITY"},
    .type = SettingType::kSwitch,
    .default_text = "auto",
    .help =
        "priority scheduling: pushes wait per server, the first declared tensor first, with at most "
        "ZPS_CREDIT_BYTES in flight; auto: on when the job spans hosts, off on one host; set 0 across hosts "
        "whose links are much faster than their CPUs (docs/performance.md#defaults)",
    .group = kGroupMessages,
    .accepts_auto = true,
};
inline constexpr Setting kCreditBytes{
    .name = "credit_bytes",
    .env = {"ZPS_CREDIT_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "auto",
    .min = 1,
    .max = int64_t{1} << 40,
    .help =
        "bytes of scheduled pushes in flight to each server (with priority scheduling); auto: one "
        "partition, then the bandwidth-delay product measured from the acknowledgements; set a value only "
        "to compare (docs/performance.md#priority-scheduling)",
    .group = kGroupMessages,
    .blank_is_unset = false,
    .accepts_auto = true,
};
inline constexpr Setting kPushLane{
    .name = "push_lane",
    .env = {"ZPS_PUSH_LANE"},
    .type = SettingType::kSwitch,
    .default_text = "1",
    .help =
        "with priority scheduling, 1: a worker opens a second connection (a lane) to each server for its "
        "scheduled pushes, so their acknowledgements never wait behind sums (a job that schedules no "
        "push keeps one connection); 0: one connection, which saves a thread hand-off per acknowledgement "
        "where the CPUs and not the links are the limit (docs/performance.md#push-lanes)",
    .group = kGroupMessages,
};
inline constexpr Setting kPushHints{
    .name = "push_hints",
    .env = {"ZPS_PUSH_HINTS"},
    .type = SettingType::kSwitch,
    .default_text = "1",
    .help =
        "with priority scheduling and three workers or more, 1: servers tell a worker which rounds wait for "
        "its push alone (every other worker has pushed them), and it sends its queued pushes of those first "
        "(docs/performance.md#push-hints); 0: each worker keeps its own order, only to compare",
    .group = kGroupMessages,
};
inline constexpr Setting kPushPacingBytes{
    .name = "push_pacing_bytes",
    .env = {"ZPS_PUSH_PACING_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "auto",
    .min = -1,
    .max = int64_t{1} << 40,
    .help =
        "with priority scheduling, a server holds back the acknowledgements (and so the push credit) of a "
        "worker that has pushed more than this many bytes beyond the slowest worker still pushing to it, "
        "for at most 100 ms, so the workers share its link evenly (docs/performance.md#defaults); -1: twice "
        "ZPS_CREDIT_BYTES; 0: off; auto: twice the push credit when the job spans hosts, off on one host "
        "(the servers read it too); set 0 where the CPUs and not the links are the limit",
    .group = kGroupMessages,
    .blank_is_unset = false,
    .accepts_auto = true,
};
inline constexpr Setting kSkipZeros{
    .name = "skip_zeros",
    .env = {"ZPS_SKIP_ZEROS"},
    .type = SettingType::kSwitch,
    .default_text = "auto",
    .help =
        "float32 pushes and sums leave out their +0.0 elements (a bitmap says which travel) where that saves "
        "an eighth of the bytes or more: lossless, the same bits arrive (the gradients of ReLU layers are "
        "often half zeros); auto: on when the job spans hosts, off on one host, where the CPUs and not the "
        "links are the limit (docs/performance.md#skipping-zeros)",
    .group = kGroupMessages,
    .accepts_auto = true,
};
inline constexpr Setting kServerEngine{
    .name = "server_engine",
    .env = {"ZPS_SERVER_ENGINE"},
    .type = SettingType::kChoice,
    .default_text = "auto",
    .choices = {"auto", "cpu", "cuda"},
    .noun = "an engine",
    .help = "server summation engine: auto (CUDA when a usable GPU is present), cpu or cuda",
    .group = kGroupMessages,
};
inline constexpr Setting kServerEngineThreads{
    .name = "server_engine_threads",
    .env = {"ZPS_SERVER_ENGINE_THREADS"},
    .type = SettingType::kInteger,
    .default_text = "2",
    .min = 1,
    .max = 256,
    .help = "summation threads per server",
    .group = kGroupMessages,
    .blank_is_unset = false,
};
inline constexpr Setting kServerMaxBytes{
    .name = "server_max_bytes",
    .env = {"ZPS_SERVER_MAX_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = int64_t{1} << 50,
    .help =
        "bytes a server may hold for keys and table rows, at most the machine's memory (0: half of "
        "the memory)",
    .group = kGroupMessages,
    .blank_is_unset = false,
};
inline constexpr Setting kTableMemoryBytes{
    .name = "table_memory_bytes",
    .env = {"ZPS_TABLE_MEMORY_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = int64_t{1} << 50,
    .help =
        "bytes a server's table rows may take before the least recently used are evicted (0: no "
        "limit; docs/tables.md)",
    .group = kGroupMessages,
    .blank_is_unset = false,
};
inline constexpr Setting kTableRowFormat{
    .name = "table_row_format",
    .env = {"ZPS_TABLE_ROW_FORMAT"},
    .type = SettingType::kChoice,
    .default_text = "float32",
    .choices = {"float32", "float16", "bfloat16"},
    .noun = "a row format",
    .help = "how servers hold table row values; optimizer state stays float32 (docs/tables.md)",
    .group = kGroupMessages,
};

}  // namespace zps::settings

#pragma GCC diagnostic pop
