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
#include "tests/integration/checkpoint_jobs.h"
#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"

using namespace zps::testing;
using namespace std::chrono_literals;

TEST_CASE("checkpoint: a 2-server checkpoint resumes with 1 and with 3 servers, the same rows and weights") {
  TwoServerCheckpoint ckpt;
  std::printf("checkpoint of 2 servers at step %llu: %llu rows, checksum %016llx\n",
              static_cast<unsigned long long>(ckpt.step), static_cast<unsigned long long>(ckpt.written.rows),
              static_cast<unsigned long long>(ckpt.written.checksum));
  std::string weights;
  for (int servers : {2, 1, 3}) {
    Job job = checkpointJob(ckpt.copy("resume-" + std::to_string(servers)), servers, 2);
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

TEST_CASE("checkpoint: ZPS_RECOVERY on, then off, then on again: each run resumes the last one's files") {
  Cluster scratch(1, 1);
  const std::string dir = scratch.dir() + "/ckpt";
  requireSuccess(checkpointJob(dir, 2, 1, {{"ZPS_RECOVERY", "1"}}));
  int epochs = 1;
  for (const char* recovery : {"0", "1"}) {
    const uint64_t step = latestStep(dir);
    Job job = checkpointJob(dir, 2, ++epochs, {{"ZPS_RECOVERY", recovery}});
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
  // One epoch of 2000 steps between checkpoints: each replacement rolls the job back to the
  // checkpoint, and 2000 steps take about 3 s on two idle cores, several times one round below.
  int w = c.startWorker(0, ctrTraining(80000, 2));
  keep.push_back(w);
  REQUIRE(c.waitForLog(w, "Training. Epoch 1,", 120s));
  const uint64_t latest = latestStep(dir);
  for (int round = 1; round <= 3; ++round) {
    std::this_thread::sleep_for(500ms);  // some steps past the checkpoint: the final shard is newer
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
  int w2 = again.startWorker(0, ctrTraining(80000, 3));
  for (int code : again.waitAll(180s)) CHECK(code == 0);
  INFO(again.log(w2));
  CHECK(contains(again.log(w2), "resumes from the checkpoint at step " + std::to_string(end)));
  std::printf(
      "three SIGTERMs after the checkpoint at step %llu left %d newer final shards; the job ended at step %llu and "
      "a new job resumed from it\n",
      static_cast<unsigned long long>(latest), newer, static_cast<unsigned long long>(end));
}
