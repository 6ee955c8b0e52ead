// Checkpoints that cannot be lost or mixed (docs/reliability.md, "Checkpoints"), with real `zps
// train` jobs on loopback: every job-shape mismatch is refused with a message naming the file, a
// `latest` that names a missing file is an error that leaves the folder alone, three SIGTERMs of a
// server within one checkpoint interval leave a resumable folder, ZPS_RECOVERY can be turned on or
// off between runs, a read-only folder fails at start, and a checkpoint of 2 servers resumes with 1
// and with 3 holding exactly the same table rows.
#include <fcntl.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "ps/common/checkpoint.h"
#include "ps/common/checkpoint_dir.h"
#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"

using zps::testing::Cluster;
using zps::testing::contains;
using zps::testing::Env;
using zps::testing::weightsChecksum;
using namespace std::chrono_literals;

namespace {

// `zps train` of a CTR model: dense weights on the worker, an embedding table on the servers (adam,
// so the checkpoint carries optimizer state too); 4/5 of `rows` for training, 32 per step.
std::vector<std::string> ctrTraining(int rows, int epochs) {
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

// One job of `servers` servers and one worker on checkpoint folder `dir`, `epochs` epochs in all.
Job trainJob(const std::string& dir, int servers, int epochs, const Env& env = {}) {
  Cluster c(servers, 1);
  c.setEnv("ZPS_CHECKPOINT_DIR", dir);
  for (const auto& [k, v] : env) c.setEnv(k, v);
  c.startScheduler();
  std::vector<int> server_ids;
  for (int s = 0; s < servers; ++s) server_ids.push_back(c.startServer());
  int w = c.startWorker(0, ctrTraining(2500, epochs));  // 62 steps per epoch
  Job job;
  job.codes = c.waitAll(120s);
  job.worker_log = c.log(w);
  for (int s : server_ids) job.server_logs.push_back(c.log(s));
  return job;
}

void requireSuccess(const Job& job) {
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
TableTotal tableTotal(const std::vector<std::string>& logs, const std::string& verb, uint64_t step) {
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

uint64_t latestStep(const std::string& dir) {
  auto s = zps::readLatestStep(dir);
  REQUIRE(s.ok());
  return *s;
}

std::string shardPath(const std::string& dir, int server, uint64_t step) {
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
void rewriteHeader(const std::string& path, void (*change)(zps::CheckpointShape*)) {
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
    Job job = trainJob(dir, 2, 1);
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

}  // namespace

TEST_CASE("checkpoint: a 2-server checkpoint resumes with 1 and with 3 servers, the same rows and weights") {
  TwoServerCheckpoint ckpt;
  std::printf("checkpoint of 2 servers at step %llu: %llu rows, checksum %016llx\n",
              static_cast<unsigned long long>(ckpt.step), static_cast<unsigned long long>(ckpt.written.rows),
              static_cast<unsigned long long>(ckpt.written.checksum));
  std::string weights;
  for (int servers : {2, 1, 3}) {
    Job job = trainJob(ckpt.copy("resume-" + std::to_string(servers)), servers, 2);
    requireSuccess(job);
    INFO(job.worker_log);
    CHECK(contains(job.worker_log, "resumes from the checkpoint at step " + std::to_string(ckpt.step)));
    TableTotal restored = tableTotal(job.server_logs, "restored", ckpt.step);
    CHECK(restored.lines == servers);
    CHECK(restored.rows == ckpt.written.rows);
    CHECK(restored.checksum == ckpt.written.checksum);
    if (servers != 2) {
      for (const auto& log : job.server_logs) {
        INFO(log);
        CHECK(
            contains(log, "2 shard(s) of a job of 2 server(s) re-sharded to " + std::to_string(servers) + " servers"));
      }
    }
    // One worker: the dense sums and the table rounds do not depend on the servers, so the resumed
    // jobs end with identical weights.
    const std::string w = weightsChecksum(job.worker_log);
    if (weights.empty()) weights = w;
    CHECK(w == weights);
    std::printf("resumed with %d server(s): %llu rows restored, checksum %016llx, final weights checksum %s\n", servers,
                static_cast<unsigned long long>(restored.rows), static_cast<unsigned long long>(restored.checksum),
                w.c_str());
  }
}

TEST_CASE("checkpoint: every job-shape mismatch is refused with a message naming the file") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  struct Case {
    std::string what;
    std::function<void(const std::string& dir)> damage;
    std::string message;
  };
  const std::vector<Case> cases = {
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
         rewriteHeader(d + "/dense-step-" + step + ".ckpt", [](zps::CheckpointShape* s) { s->step += 1; });
       },
       "dense-step-" + step + ".ckpt belongs to another job shape, refused: it records step " +
           std::to_string(ckpt.step + 1)},
      {"a dense model of another job (the folder's job-id replaced)",
       [&](const std::string& d) { std::ofstream(d + "/job-id") << "00000000000000aa\n"; },
       "dense-step-" + step + ".ckpt belongs to another job shape, refused: it records job id"},
  };
  int n = 0;
  for (const auto& tc : cases) {
    const std::string dir = ckpt.copy("mismatch-" + std::to_string(n++));
    tc.damage(dir);
    Job job = trainJob(dir, 2, 2);
    std::string logs = job.worker_log;
    for (const auto& l : job.server_logs) logs += l;
    INFO(tc.what << "\n" << job.worker_log);
    CHECK(job.codes.back() != 0);
    CHECK(contains(logs, tc.message));
    CHECK(contains(job.worker_log, dir + "/"));  // the file is named
    CHECK_FALSE(contains(job.worker_log, "Training. Epoch"));
    std::printf("refused %s: exit %d\n", tc.what.c_str(), job.codes.back());
  }
}

TEST_CASE("checkpoint: `latest` naming a missing file is an error and the folder is left as it was") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  for (const std::string missing : {"dense", "shard"}) {
    const std::string dir = ckpt.copy("missing-" + missing);
    const std::string path = missing == "dense" ? dir + "/dense-step-" + step + ".ckpt" : shardPath(dir, 1, ckpt.step);
    std::filesystem::remove(path);
    size_t files_before = 0;
    for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it)
      ++files_before;
    Job job = trainJob(dir, 2, 2);
    INFO(job.worker_log);
    CHECK(job.codes.back() != 0);
    CHECK(contains(job.worker_log, path + " does not exist"));
    if (missing == "dense") {
      CHECK(job.codes.back() == 2);
      CHECK(contains(job.worker_log, "refusing to start over from step 0"));
    }
    CHECK_FALSE(contains(job.worker_log, "Training. Epoch"));
    CHECK(latestStep(dir) == ckpt.step);
    size_t files_after = 0;
    for (auto it = std::filesystem::directory_iterator(dir); it != std::filesystem::directory_iterator(); ++it)
      ++files_after;
    CHECK(files_after == files_before);
    std::printf("latest names a missing %s file: worker exit %d\n", missing.c_str(), job.codes.back());
  }
}

TEST_CASE("checkpoint: ZPS_RECOVERY on, then off, then on again: each run resumes the last one's files") {
  Cluster scratch(1, 1);
  const std::string dir = scratch.dir() + "/ckpt";
  requireSuccess(trainJob(dir, 2, 1, {{"ZPS_RECOVERY", "1"}}));
  int epochs = 1;
  for (const char* recovery : {"0", "1"}) {
    const uint64_t step = latestStep(dir);
    Job job = trainJob(dir, 2, ++epochs, {{"ZPS_RECOVERY", recovery}});
    requireSuccess(job);
    INFO("ZPS_RECOVERY=" << recovery << "\n" << job.worker_log);
    CHECK(contains(job.worker_log, "resumes from the checkpoint at step " + std::to_string(step)));
    CHECK(tableTotal(job.server_logs, "restored", step).lines == 2);
    CHECK(latestStep(dir) > step);
  }
}

// Makes `dir` unwritable for this process and its children: mode 0555 for a normal user, the
// immutable attribute for root (which mode bits do not stop). Undone by the destructor.
struct ReadOnlyFolder {
  std::string dir;
  bool immutable = false;
  explicit ReadOnlyFolder(std::string d) : dir(std::move(d)) {
    std::filesystem::create_directories(dir);
    ::chmod(dir.c_str(), 0555);
    if (::geteuid() == 0) immutable = setImmutable(true);
  }
  ~ReadOnlyFolder() {
    if (immutable) setImmutable(false);
    ::chmod(dir.c_str(), 0755);
  }
  bool setImmutable(bool on) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return false;
    int flags = 0;
    bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    ok = ok && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
    ::close(fd);
    return ok;
  }
  bool writable() const {
    const std::string probe = dir + "/probe";
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT, 0600);
    if (fd < 0) return false;
    ::close(fd);
    ::unlink(probe.c_str());
    return true;
  }
};

TEST_CASE("checkpoint: a read-only checkpoint folder fails the server and the worker at start, exit 2") {
  Cluster c(1, 1);
  ReadOnlyFolder folder(c.dir() + "/readonly");
  if (folder.writable()) {
    WARN("SKIPPED: cannot make a folder read-only here (neither mode bits nor the immutable attribute hold)");
    return;
  }
  // The server checks before it registers.
  int s = c.startServer({{"ZPS_CHECKPOINT_DIR", folder.dir}});
  CHECK(c.waitExit(s, 30s) == 2);
  INFO(c.log(s));
  CHECK(contains(c.log(s),
                 "ZPS_CHECKPOINT_DIR: the checkpoint folder is not writable: cannot create files in " + folder.dir));
  // The worker (process 0 writes the dense model) checks before its first step.
  c.startScheduler();
  c.startServer({{"ZPS_SERVER_ID", "0"}});
  int w = c.startWorker(0, ctrTraining(2500, 1), {{"ZPS_CHECKPOINT_DIR", folder.dir}});
  CHECK(c.waitExit(w, 60s) == 2);
  INFO(c.log(w));
  CHECK(contains(c.log(w), "the checkpoint folder is not writable"));
  CHECK_FALSE(contains(c.log(w), "Training. Epoch"));
}

// ZPS_RECOVERY: server 1 is SIGTERMed three times within one checkpoint interval (each time its
// replacement restores and the job redoes some steps), so each writes a final shard newer than the
// step `latest` names. Retention must keep that step: the job ends, and a new job resumes from it.
TEST_CASE("checkpoint: three SIGTERMs of a server within one checkpoint interval leave a resumable folder") {
  Cluster c(2, 1);
  const std::string dir = c.dir() + "/ckpt";
  c.setEnv("ZPS_CHECKPOINT_DIR", dir);
  c.setEnv("ZPS_RECOVERY", "1");
  c.setEnv("ZPS_RECOVERY_TIMEOUT", "30");
  c.setEnv("ZPS_HEARTBEAT_INTERVAL", "0.3");
  std::vector<int> keep = {c.startScheduler(), c.startServer()};
  int victim = c.startServer();
  // One epoch of 1000 steps between checkpoints: long enough for three SIGTERMs.
  int w = c.startWorker(0, ctrTraining(40000, 2));
  keep.push_back(w);
  REQUIRE(c.waitForLog(w, "Training. Epoch 1,", 120s));
  const uint64_t latest = latestStep(dir);
  for (int round = 1; round <= 3; ++round) {
    std::this_thread::sleep_for(1s);  // some steps past the checkpoint: the final shard is newer
    c.signal(victim, SIGTERM);
    INFO(c.logTail(victim));
    REQUIRE(c.waitExit(victim, 30s) == 0);
    victim = c.startServer({{"ZPS_SERVER_ID", "1"}});
    REQUIRE(c.waitForLog(victim, "restored table 'train/embedding'", 60s));
    INFO(c.log(victim));
    REQUIRE(contains(c.log(victim), "from step " + std::to_string(latest)));
  }
  // The three final shards are there, newer than `latest`: the case that used to prune its step.
  int newer = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::smatch m;
    const std::string f = e.path().filename().string();
    if (std::regex_match(f, m, std::regex("table-train_embedding-[0-9a-f]+-server-1-step-([0-9]+)\\.ckpt")) &&
        std::stoull(m[1]) > latest)
      ++newer;
  }
  CHECK(newer >= 3);
  keep.push_back(victim);
  for (int i : keep) {
    INFO(c.logTail(i));
    REQUIRE(c.waitExit(i, 180s) == 0);
  }
  INFO(c.log(w));
  CHECK(c.log(w).find("rolling back to the latest checkpoint") != std::string::npos);
  // The folder resumes: a new job of 3 epochs starts from the end of epoch 2.
  const uint64_t end = latestStep(dir);
  CHECK(end == 2 * latest);
  Cluster again(2, 1);
  again.setEnv("ZPS_CHECKPOINT_DIR", dir);
  again.startScheduler();
  again.startServer();
  again.startServer();
  int w2 = again.startWorker(0, ctrTraining(40000, 3));
  for (int code : again.waitAll(180s)) CHECK(code == 0);
  INFO(again.log(w2));
  CHECK(contains(again.log(w2), "resumes from the checkpoint at step " + std::to_string(end)));
  std::printf(
      "three SIGTERMs after the checkpoint at step %llu left %d newer final shards; the job ended at step %llu and "
      "a new job resumed from it\n",
      static_cast<unsigned long long>(latest), newer, static_cast<unsigned long long>(end));
}
