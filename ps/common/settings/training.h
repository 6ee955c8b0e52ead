// Settings of checkpoints and recovery, local ranks, gradient compression and zps.torch (one
// constant each; see ps/common/settings.h).
#pragma once

#include "ps/common/setting.h"

// Each constant names only the fields it sets; the others keep setting.h's defaults (which GCC's
// -Wmissing-field-initializers would report once per constant).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace zps::settings {

// The headings these settings appear under in help and docs.
inline constexpr std::string_view kGroupCheckpoints = "Checkpoints, recovery and asynchronous training";
inline constexpr std::string_view kGroupLocal = "Local ranks (several processes per worker node)";
inline constexpr std::string_view kGroupCompression = "Gradient compression";
inline constexpr std::string_view kGroupTorch = "PyTorch (zps.torch)";

// Checkpoints, recovery, asynchronous training.
inline constexpr Setting kCheckpointDir{
    .name = "checkpoint_dir",
    .env = {"ZPS_CHECKPOINT_DIR"},
    .type = SettingType::kText,
    .help = "folder for checkpoints (servers' shards, worker 0's model); empty: no checkpoints",
    .group = kGroupCheckpoints,
};
inline constexpr Setting kCheckpointEvery{
    .name = "checkpoint_every",
    .env = {"ZPS_CHECKPOINT_EVERY"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = int64_t{1} << 40,
    .help = "steps between checkpoints (0: every epoch end)",
    .group = kGroupCheckpoints,
    .blank_is_unset = false,
};
inline constexpr Setting kTableCheckpointIncrements{
    .name = "table_checkpoint_increments",
    .env = {"ZPS_TABLE_CHECKPOINT_INCREMENTS"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 1000,
    .help = "table checkpoints written as increments (changed rows only) after each full one (0: all full)",
    .group = kGroupCheckpoints,
    .blank_is_unset = false,
};
inline constexpr Setting kRecovery{
    .name = "recovery",
    .env = {"ZPS_RECOVERY"},
    .type = SettingType::kSwitch,
    .default_text = "0",
    .help = "survive a lost node: hold its rank for a replacement and roll back to the latest checkpoint",
    .group = kGroupCheckpoints,
};
inline constexpr Setting kRecoveryTimeout{
    .name = "recovery_timeout",
    .env = {"ZPS_RECOVERY_TIMEOUT"},
    .type = SettingType::kSeconds,
    .default_text = "300",
    .help = "seconds the scheduler holds a lost node's rank before it fails the job (more than 0)",
    .group = kGroupCheckpoints,
    .blank_is_unset = false,
};
inline constexpr Setting kEnableAsync{
    .name = "enable_async",
    .env = {"ZPS_ENABLE_ASYNC", "BYTEPS_ENABLE_ASYNC"},
    .type = SettingType::kSwitch,
    .default_text = "0",
    .help = "asynchronous training: servers apply each push at once",
    .group = kGroupCheckpoints,
};

// Local ranks.
inline constexpr Setting kLocalSize{
    .name = "local_size",
    .env = {"ZPS_LOCAL_SIZE", "BYTEPS_LOCAL_SIZE"},
    .type = SettingType::kInteger,
    .default_text = "1",
    .min = 1,
    .max = 1024,
    .hint = "the number of processes per node, e.g. 8",
    .help = "processes per worker node (one per GPU); 1: no local reduction",
    .group = kGroupLocal,
};
inline constexpr Setting kLocalRank{
    .name = "local_rank",
    .env = {"ZPS_LOCAL_RANK", "BYTEPS_LOCAL_RANK"},
    .type = SettingType::kInteger,
    .default_text = "0",
    .min = 0,
    .max = 1023,
    .hint = "this process's index on its node, from 0",
    .help = "this process's index on its worker node, below the local size",
    .group = kGroupLocal,
};
inline constexpr Setting kLocalReduce{
    .name = "local_reduce",
    .env = {"ZPS_LOCAL_REDUCE"},
    .type = SettingType::kChoice,
    .default_text = "auto",
    .choices = {"auto", "shm", "nccl"},
    .noun = "a local reduction backend",
    .help =
        "how a node's local ranks reduce: auto (NCCL for GPU tensors, shared memory for host "
        "tensors), shm or nccl",
    .group = kGroupLocal,
};
inline constexpr Setting kShmDir{
    .name = "shm_dir",
    .env = {"ZPS_SHM_DIR"},
    .type = SettingType::kText,
    .default_text = "/dev/shm",
    .help = "folder (an absolute path) for the local reducer's shared-memory segments",
    .group = kGroupLocal,
};

// Compression.
inline constexpr Setting kCompressor{
    .name = "compressor",
    .env = {"ZPS_COMPRESSOR"},
    .type = SettingType::kChoice,
    .default_text = "none",
    .choices = {"none", "fp16", "topk", "randomk"},
    .noun = "a compressor",
    .help = "compression of float32 tensor pushes",
    .group = kGroupCompression,
};
inline constexpr Setting kCompressRatio{
    .name = "compress_ratio",
    .env = {"ZPS_COMPRESS_RATIO"},
    .type = SettingType::kFraction,
    .default_text = "0.01",
    .help = "share of each partition's elements topk and randomk send per round",
    .group = kGroupCompression,
    .blank_is_unset = false,
};
inline constexpr Setting kMinCompressBytes{
    .name = "min_compress_bytes",
    .env = {"ZPS_MIN_COMPRESS_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "16384",
    .min = 0,
    .max = int64_t{1} << 40,
    .help = "ZPS_COMPRESSOR leaves smaller tensors dense",
    .group = kGroupCompression,
    .blank_is_unset = false,
};

// zps.torch: read by the Python package (python/zps/torch/optimizer.py), listed here for help and docs.
inline constexpr Setting kTorchBucketBytes{
    .name = "torch_bucket_bytes",
    .flag = false,
    .env = {"ZPS_TORCH_BUCKET_BYTES"},
    .type = SettingType::kInteger,
    .default_text = "1048576",
    .min = 0,
    .max = int64_t{1} << 30,
    .help =
        "zps.torch.DistributedOptimizer: gradients smaller than this share one push_pull per bucket of at "
        "most this many bytes (neighbours in backward's order, one dtype); 0: every gradient alone "
        "(docs/pytorch.md)",
    .group = kGroupTorch,
};

}  // namespace zps::settings

#pragma GCC diagnostic pop
