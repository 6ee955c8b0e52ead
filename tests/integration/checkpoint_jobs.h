// Helpers for the checkpoint integration tests (checkpoint_test.cc, checkpoint_refusal_test.cc): a
// `zps train` CTR job on a checkpoint folder, the table rows and checksums its servers log, the files
// of a folder, and a finished 2-server checkpoint to copy.
#pragma once

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "ps/common/checkpoint.h"
#include "ps/common/checkpoint_dir.h"
#include "tests/integration/cluster.h"

namespace zps::testing {

using namespace std::chrono_literals;

// `zps train` of a CTR model: dense weights on the worker, an embedding table on the servers (adam,
// so the checkpoint carries optimizer state too); 4/5 of `rows` for training, 32 per step.
inline std::vector<std::string> ctrTraining(int rows, int epochs) {
  return {"train",
          "--model",
          "ctr",
          "--data",
          "synthetic-ctr",
          "--synthetic_rows",
          std::to_string(rows),
          "--batch_size",
          "32",
          "--hidden",
          "16",
          "--table_optimizer",
          "adam",
          "--epochs",
          std::to_string(epochs)};
}

struct Job {
  std::vector<int> codes;  // scheduler, servers..., worker
  std::string worker_log;
  std::vector<std::string> server_logs;
};

// One job of `servers` servers and one worker on checkpoint folder `dir`, `epochs` epochs in all;
// `extra_args` go after ctrTraining's (a flag given twice takes the last value).
inline Job checkpointJob(const std::string& dir, int servers, int epochs, const Env& env = {},
                         const std::vector<std::string>& extra_args = {}) {
  Cluster c(servers, 1);
  c.setEnv("ZPS_CHECKPOINT_DIR", dir);
  for (const auto& [k, v] : env) c.setEnv(k, v);
  c.startScheduler();
  std::vector<int> server_ids;
  for (int s = 0; s < servers; ++s) server_ids.push_back(c.startServer());
  std::vector<std::string> args = ctrTraining(2500, epochs);  // 62 steps per epoch
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  int w = c.startWorker(0, args);
  Job job;
  job.codes = c.waitAll(120s);
  job.worker_log = c.log(w);
  for (int s : server_ids) job.server_logs.push_back(c.log(s));
  return job;
}

inline void requireSuccess(const Job& job) {
  for (size_t i = 0; i < job.codes.size(); ++i) {
    INFO("process " << i << "\n" << job.worker_log);
    for (const auto& l : job.server_logs) INFO(l);
    REQUIRE(job.codes[i] == 0);
  }
}

// The table's rows and checksum summed over the servers' log lines "<verb> table 'train/embedding'
// (N rows, checksum C) ... step S" for step `step`; the checksum sum wraps like the servers' own.
struct TableTotal {
  uint64_t rows = 0, checksum = 0;
  int lines = 0;
};
inline TableTotal tableTotal(const std::vector<std::string>& logs, const std::string& verb, uint64_t step) {
  TableTotal t;
  std::regex re(verb + " table 'train/embedding' \\(([0-9]+) rows, checksum ([0-9a-f]+)\\)[^\\n]*step " +
                std::to_string(step) + "\\b");
  for (const auto& log : logs) {
    for (auto it = std::sregex_iterator(log.begin(), log.end(), re); it != std::sregex_iterator(); ++it) {
      t.rows += std::stoull((*it)[1]);
      t.checksum += std::stoull((*it)[2], nullptr, 16);
      ++t.lines;
    }
  }
  return t;
}

inline uint64_t latestStep(const std::string& dir) {
  auto s = zps::readLatestStep(dir);
  REQUIRE(s.ok());
  return *s;
}

inline std::string shardPath(const std::string& dir, int server, uint64_t step) {
  // tableShardPath's name for 'train/embedding' (its CRC-32 is fixed).
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    const std::string tail = "-server-" + std::to_string(server) + "-step-" + std::to_string(step) + ".ckpt";
    if (f.rfind("table-train_embedding-", 0) == 0 && f.size() > tail.size() &&
        f.compare(f.size() - tail.size(), tail.size(), tail) == 0)
      return e.path().string();
  }
  FAIL("no shard of server " << server << " at step " << step << " in " << dir);
  return "";
}

// Rewrites a checkpoint file with one header field changed (its payload and CRCs stay valid).
inline void rewriteHeader(const std::string& path, void (*change)(zps::CheckpointShape*)) {
  auto f = zps::readAnyCheckpointFile(path, 1 << 30);
  REQUIRE(f.ok());
  change(&f->shape);
  REQUIRE(zps::writeCheckpointFile(path, f->shape, f->payload).ok());
}

// A finished 2-server, 1-epoch job's checkpoint folder, copied to `to` for each use.
struct TwoServerCheckpoint {
  Cluster scratch{1, 1};  // owns the folder (removed with it)
  std::string dir = scratch.dir() + "/written";
  uint64_t step = 0;
  TableTotal written;
  TwoServerCheckpoint() {
    Job job = checkpointJob(dir, 2, 1);
    requireSuccess(job);
    step = latestStep(dir);
    written = tableTotal(job.server_logs, "checkpointed", step);
    REQUIRE(written.lines == 2);
    REQUIRE(written.rows > 0);
  }
  std::string copy(const std::string& name) const {
    const std::string to = scratch.dir() + "/" + name;
    std::filesystem::copy(dir, to, std::filesystem::copy_options::recursive);
    return to;
  }
};

}  // namespace zps::testing
