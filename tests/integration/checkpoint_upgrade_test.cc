// Checkpoint folders written by an older zps (format version 1, docs/reliability.md "Checkpoints"):
// `zps train` refuses them with exit 2 naming `zps checkpoint upgrade DIR`; after the upgrade the job
// resumes with exactly the table rows and final weights of the same checkpoint written as version 2.
// The upgrade refuses a damaged file before it changes anything, and takes the number of servers
// from --servers when the folder cannot tell it.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <tuple>

#include "ps/common/checkpoint.h"
#include "ps/server/table_checkpoint.h"
#include "tests/integration/checkpoint_jobs.h"
#include "tests/integration/cluster.h"
#include "tests/integration/train_jobs.h"
#include "tests/unit/version1_writer.h"

using namespace zps::testing;
using namespace std::chrono_literals;

namespace {

// The key an older zps named a table's shards by (any number: the upgrade takes the name from the payload).
constexpr const char* kOldTableKey = "35184372088832";

// Rewrites a version 2 folder as version 1 files under version 1 names, and removes its job-id, as
// an older zps left it. Returns the number of checkpoint files.
int makeVersion1(const std::string& dir) {
  int files = 0;
  const std::regex shard("table-train_embedding-[0-9a-f]{8}-server-([0-9]+)-step-([0-9]+)\\.ckpt");
  std::vector<std::filesystem::path> paths;
  for (const auto& e : std::filesystem::directory_iterator(dir)) paths.push_back(e.path());
  for (const auto& path : paths) {
    const std::string name = path.filename().string();
    std::smatch m;
    const bool is_shard = std::regex_match(name, m, shard);
    if (!is_shard && name.rfind("dense-step-", 0) != 0) continue;
    auto f = zps::readAnyCheckpointFile(path.string(), 1 << 30);
    REQUIRE(f.ok());
    const std::string old_name =
        is_shard ? "table-" + std::string(kOldTableKey) + "-server-" + m[1].str() + "-step-" + m[2].str() + ".ckpt"
                 : name;
    std::filesystem::remove(path);
    REQUIRE(writeVersion1File(dir + "/" + old_name, f->shape.kind, f->shape.step, f->payload));
    ++files;
  }
  std::filesystem::remove(dir + "/job-id");
  return files;
}

// Runs `zps checkpoint upgrade DIR ARGS...`; returns its exit code and output.
std::pair<int, std::string> upgrade(Cluster& c, const std::string& dir, const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {c.bin(), "checkpoint", "upgrade", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const int i = c.start("upgrade", argv);
  const int code = c.waitExit(i, 60s);
  return {code, c.log(i)};
}

std::map<std::string, std::string> folderBytes(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files[e.path().filename().string()] = readFile(e.path().string());
  return files;
}

}  // namespace

TEST_CASE("checkpoint: a version 1 folder is refused naming the upgrade and resumes exactly after it") {
  TwoServerCheckpoint ckpt;
  const std::string step = std::to_string(ckpt.step);
  Job reference = checkpointJob(ckpt.copy("version-2"), 2, 2);
  requireSuccess(reference);

  const std::string dir = ckpt.copy("version-1");
  const int files = makeVersion1(dir);
  REQUIRE(files >= 3);  // the dense model and both servers' shards of `latest`'s step
  Job refused = checkpointJob(dir, 2, 2);
  {
    INFO(refused.worker_log);
    CHECK(refused.codes.back() == 2);
    CHECK(contains(refused.worker_log, "checkpoint " + dir + "/dense-step-" + step + ".ckpt has format version 1"));
    CHECK(contains(refused.worker_log, "convert the folder once with `zps checkpoint upgrade " + dir + "`"));
    CHECK_FALSE(contains(refused.worker_log, "Training. Epoch"));
  }

  Cluster c(1, 1);
  const auto [code, out] = upgrade(c, dir);
  INFO(out);
  REQUIRE(code == 0);
  CHECK(contains(out, std::to_string(files) + " file(s) converted to version 2 ("));
  CHECK(contains(out, "table shard(s) of a job of 2 server(s)), 0 already of version 2"));
  CHECK(contains(out, "/table-" + std::string(kOldTableKey) + "-server-1-step-" + step + ".ckpt -> " + dir +
                          "/table-train_embedding-"));
  CHECK(contains(out, dir + "/latest names step " + step));
  CHECK(std::filesystem::exists(dir + "/job-id"));

  Job resumed = checkpointJob(dir, 2, 2);
  requireSuccess(resumed);
  INFO(resumed.worker_log);
  CHECK(contains(resumed.worker_log, "resumes from the checkpoint at step " + step));
  const TableTotal restored = tableTotal(resumed.server_logs, "restored", ckpt.step);
  CHECK(restored.lines == 2);
  CHECK(restored.rows == ckpt.written.rows);
  CHECK(restored.checksum == ckpt.written.checksum);
  CHECK(weightsChecksum(resumed.worker_log) == weightsChecksum(reference.worker_log));

  // Once is enough: a second upgrade finds nothing to convert.
  const auto [again_code, again] = upgrade(c, dir);
  CHECK(again_code == 0);
  CHECK(contains(again, "0 file(s) converted to version 2"));
  std::printf(
      "version 1 folder (%d files): train exit %d before the upgrade; after it %llu rows restored, checksum %016llx "
      "(written %016llx), final weights checksum %s (resumed from version 2: %s)\n",
      files, refused.codes.back(), static_cast<unsigned long long>(restored.rows),
      static_cast<unsigned long long>(restored.checksum), static_cast<unsigned long long>(ckpt.written.checksum),
      weightsChecksum(resumed.worker_log).c_str(), weightsChecksum(reference.worker_log).c_str());
}

TEST_CASE("checkpoint upgrade: a damaged file stops it before anything changes, and --servers gives the servers") {
  Cluster c(1, 1);
  const std::string dir = c.dir() + "/one-server";
  std::filesystem::create_directories(dir);
  // Server 1's shard only, as in a folder per server pod; its payload starts with the table's name.
  zps::PayloadWriter payload;
  payload.put(uint32_t{3});
  payload.putBytes("emb", 3);
  const std::string shard = dir + "/table-7-server-1-step-5.ckpt";
  REQUIRE(writeVersion1File(shard, zps::CheckpointKind::kParamTable, 5, payload.take()));
  REQUIRE(writeVersion1File(dir + "/dense-step-5.ckpt", zps::CheckpointKind::kDenseModel, 5, "weights"));
  std::string damaged = readFile(shard);
  damaged.back() ^= 1;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << damaged;
  const auto before = folderBytes(dir);
  auto [code, out] = upgrade(c, dir);
  CHECK(code == 2);
  CHECK(contains(out, "checkpoint " + shard + " is corrupt: CRC mismatch; nothing was changed"));
  auto after = folderBytes(dir);
  after.erase("job-id");  // drawn before the files are read, as a job starting on the folder would
  CHECK(after == before);

  damaged.back() ^= 1;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << damaged;
  std::tie(code, out) = upgrade(c, dir, {"--servers", "1"});
  CHECK(code == 2);
  CHECK(contains(out, shard + " is server 1's shard, but --servers says the job had 1"));
  std::tie(code, out) = upgrade(c, dir, {"--servers", "3"});
  INFO(out);
  CHECK(code == 0);
  CHECK(contains(out, "2 file(s) converted to version 2 (1 dense, 1 table shard(s) of a job of 3 server(s))"));
  auto converted = zps::readAnyCheckpointFile(zps::tableShardPath(dir, "emb", 1, 5), 1 << 20);
  REQUIRE(converted.ok());
  CHECK(converted->shape.num_servers == 3);
  CHECK(converted->shape.server_rank == 1);
  CHECK(converted->shape.table == "emb");

  std::tie(code, out) = upgrade(c, c.dir() + "/no-such-folder");
  CHECK(code == 2);
  CHECK(contains(out, "no-such-folder is not a folder"));
  const int usage = c.start("usage", {c.bin(), "checkpoint", "convert", dir});
  CHECK(c.waitExit(usage, 30s) == 2);
  CHECK(contains(c.log(usage), "usage: zps checkpoint upgrade DIR [--servers N]"));
}
