// Every checkpoint file a resume refuses (docs/reliability.md, "Checkpoints") fails `zps train` with
// exit 2, a user error, and a message naming the file, whether worker 0 refused it (the dense model,
// `latest`) or a server (a table shard, refused in its answer to the table's declaration): a file of
// another job shape, a damaged file, a file of format version 1, a file that does not fit the model, a
// missing one.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "ps/common/checkpoint.h"
#include "tests/integration/checkpoint_jobs.h"
#include "tests/integration/cluster.h"

using namespace zps::testing;
using namespace std::chrono_literals;

namespace {

struct Case {
  std::string what;
  std::function<void(const std::string& dir)> damage;
  std::string message;  // part of the refusal, in a log of the job
  std::vector<std::string> extra_args = {};
};

// Copies the checkpoint for each case, damages it, resumes it with 2 servers and requires the
// worker to exit 2 before its first step, with the message and the damaged folder's path in its log.
void expectRefusals(const TwoServerCheckpoint& ckpt, const std::string& name, const std::vector<Case>& cases) {
  int n = 0;
  for (const auto& tc : cases) {
    const std::string dir = ckpt.copy(name + "-" + std::to_string(n++));
    tc.damage(dir);
    Job job = checkpointJob(dir, 2, 2, {}, tc.extra_args);
    std::string logs = job.worker_log;
    for (const auto& l : job.server_logs) logs += l;
    INFO(tc.what << "\n" << job.worker_log);
    CHECK(job.codes.back() == 2);
    CHECK(contains(logs, tc.message));
    CHECK(contains(job.worker_log, dir + "/"));  // the file is named
    CHECK_FALSE(contains(job.worker_log, "Training. Epoch"));
    std::printf("refused %s: worker exit %d, servers exit %d %d\n", tc.what.c_str(), job.codes.back(), job.codes[1],
                job.codes[2]);
  }
}

void damageFile(const std::string& path, const std::function<void(std::string*)>& change) {
  std::string bytes = readFile(path);
  REQUIRE(!bytes.empty());
  change(&bytes);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

TEST_CASE("checkpoint: every job-shape mismatch is refused with exit 2 and a message naming the file") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  expectRefusals(ckpt, "mismatch",
                 {
                     {"a shard of another step",
                      [&](const std::string& d) {
                        rewriteHeader(shardPath(d, 0, ckpt.step), [](zps::CheckpointShape* s) { s->step -= 1; });
                      },
                      "records step " + std::to_string(ckpt.step - 1) + " (expected " + step + ")"},
                     {"another server's shard",
                      [&](const std::string& d) {
                        std::filesystem::copy_file(shardPath(d, 1, ckpt.step), shardPath(d, 0, ckpt.step),
                                                   std::filesystem::copy_options::overwrite_existing);
                      },
                      "records server rank 1 (expected 0)"},
                     {"a shard of a job of another number of servers",
                      [&](const std::string& d) {
                        rewriteHeader(shardPath(d, 1, ckpt.step), [](zps::CheckpointShape* s) { s->num_servers = 3; });
                      },
                      "records number of servers 3 (expected 2)"},
                     {"a shard of another table",
                      [&](const std::string& d) {
                        rewriteHeader(shardPath(d, 0, ckpt.step), [](zps::CheckpointShape* s) { s->table = "other"; });
                      },
                      "records table 'other' (expected 'train/embedding')"},
                     {"a shard of another job",
                      [&](const std::string& d) {
                        rewriteHeader(shardPath(d, 1, ckpt.step), [](zps::CheckpointShape* s) { s->job_id ^= 1; });
                      },
                      "this folder's job-id: the file comes from another checkpoint folder"},
                     {"a dense model of another step",
                      [&](const std::string& d) {
                        rewriteHeader(d + "/dense-step-" + step + ".ckpt",
                                      [](zps::CheckpointShape* s) { s->step += 1; });
                      },
                      "dense-step-" + step + ".ckpt belongs to another job shape, refused: it records step " +
                          std::to_string(ckpt.step + 1)},
                     {"a dense model of another job (the folder's job-id replaced)",
                      [&](const std::string& d) { std::ofstream(d + "/job-id") << "00000000000000aa\n"; },
                      "dense-step-" + step + ".ckpt belongs to another job shape, refused: it records job id"},
                 });
}

TEST_CASE("checkpoint: a damaged file, or one that does not fit the job, is refused with exit 2 naming it") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  auto dense = [&](const std::string& d) { return d + "/dense-step-" + step + ".ckpt"; };
  expectRefusals(
      ckpt, "damaged",
      {
          {"a shard whose payload changed",
           [&](const std::string& d) {
             damageFile(shardPath(d, 0, ckpt.step), [](std::string* b) { b->back() ^= 1; });
           },
           "is corrupt: CRC mismatch"},
          {"a truncated shard",
           [&](const std::string& d) {
             damageFile(shardPath(d, 1, ckpt.step), [](std::string* b) { b->resize(b->size() - 9); });
           },
           "(truncated?)"},
          {"a FIFO in a shard's place",
           [&](const std::string& d) {
             const std::string path = shardPath(d, 1, ckpt.step);
             std::filesystem::remove(path);
             REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
           },
           "is not a regular file"},
          {"a shard holding another server's rows",
           [&](const std::string& d) {
             // Server 0's rows under server 1's (valid) header: each row's owner is checked.
             auto rows = zps::readAnyCheckpointFile(shardPath(d, 0, ckpt.step), 1 << 30);
             auto header = zps::readAnyCheckpointFile(shardPath(d, 1, ckpt.step), 1 << 30);
             REQUIRE(rows.ok());
             REQUIRE(header.ok());
             REQUIRE(zps::writeCheckpointFile(shardPath(d, 1, ckpt.step), header->shape, rows->payload).ok());
           },
           "belongs to server 0 of 2, not to server 1 whose shard this is"},
          {"a shard of another table optimizer (--table_optimizer adagrad)", [](const std::string&) {},
           "does not match table 'train/embedding'", std::vector<std::string>{"--table_optimizer", "adagrad"}},
          {"a dense model in format version 1 (before any release: no job shape recorded)",
           [&](const std::string& d) {
             // The version 1 layout: magic, version, kind, step, payload length, payload CRC, payload.
             auto f = zps::readAnyCheckpointFile(dense(d), 1 << 30);
             REQUIRE(f.ok());
             zps::PayloadWriter w;
             w.putBytes("ZPSCKPT1", 8);
             w.put(uint32_t{1});
             w.put(static_cast<uint32_t>(zps::CheckpointKind::kDenseModel));
             w.put(ckpt.step);
             w.put(static_cast<uint64_t>(f->payload.size()));
             w.put(zps::crc32(f->payload.data(), f->payload.size()));
             std::ofstream(dense(d), std::ios::binary | std::ios::trunc) << w.take() + f->payload;
           },
           "dense-step-" + step +
               ".ckpt has format version 1, which this zps no longer reads (it reads version 2): start the job "
               "without it, from a new checkpoint folder"},
          {"a dense model whose payload changed",
           [&](const std::string& d) { damageFile(dense(d), [](std::string* b) { b->back() ^= 1; }); },
           "dense-step-" + step + ".ckpt is corrupt: CRC mismatch"},
          {"a dense model of another model (--hidden 8)", [](const std::string&) {},
           "dense-step-" + step + ".ckpt does not fit this model", std::vector<std::string>{"--hidden", "8"}},
          {"a `latest` that holds no step",
           [&](const std::string& d) { std::ofstream(d + "/latest", std::ios::trunc) << "sixty-two\n"; },
           "/latest holds 'sixty-two', not a step number written by zps"},
      });
}

TEST_CASE("checkpoint: `latest` naming a missing file is refused with exit 2 and the folder is left as it was") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  for (const std::string missing : {"dense", "shard"}) {
    const std::string dir = ckpt.copy("missing-" + missing);
    const std::string path = missing == "dense" ? dir + "/dense-step-" + step + ".ckpt" : shardPath(dir, 1, ckpt.step);
    std::filesystem::remove(path);
    size_t files_before = 0;
    for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it)
      ++files_before;
    Job job = checkpointJob(dir, 2, 2);
    INFO(job.worker_log);
    CHECK(job.codes.back() == 2);
    CHECK(contains(job.worker_log, path + " does not exist"));
    if (missing == "dense") CHECK(contains(job.worker_log, "refusing to start over from step 0"));
    CHECK_FALSE(contains(job.worker_log, "Training. Epoch"));
    CHECK(latestStep(dir) == ckpt.step);
    size_t files_after = 0;
    for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it)
      ++files_after;
    CHECK(files_after == files_before);
    std::printf("latest names a missing %s file: worker exit %d\n", missing.c_str(), job.codes.back());
  }
}
