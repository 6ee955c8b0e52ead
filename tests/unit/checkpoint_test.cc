// Tests for checkpoint files (ps/common/checkpoint.h) and the checkpoint folder
// (ps/common/checkpoint_dir.h): the job-shape header round-trips, every field that differs is
// refused by name, damaged or foreign files are refused before their payload is trusted, the job id
// is minted once, `latest` is read with bounds, and retention keeps what `latest` names.
#include "ps/common/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "ps/common/checkpoint_dir.h"
#include "tests/unit/scratch_folder.h"

namespace zps {
namespace {

using testing::ScratchFolder;

CheckpointShape shardShape() {
  CheckpointShape s;
  s.kind = CheckpointKind::kParamTable;
  s.step = 40;
  s.server_rank = 1;
  s.num_servers = 2;
  s.table = "train/embedding";
  s.job_id = 0x1234abcd5678ef00ull;
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST_CASE("checkpoint: the job shape round-trips and every field that differs is refused by name") {
  ScratchFolder dir;
  const std::string path = dir.path + "/shard.ckpt";
  REQUIRE(writeCheckpointFile(path, shardShape(), "payload bytes").ok());
  auto f = readCheckpointFile(path, shardShape(), 1 << 20);
  REQUIRE(f.ok());
  CHECK(f->payload == "payload bytes");
  CHECK(f->shape.table == "train/embedding");
  CHECK(f->shape.describe() == "step 40, server 1 of 2, table 'train/embedding', job 1234abcd5678ef00");

  struct Case {
    void (*change)(CheckpointShape*);
    std::string message;
  };
  const Case cases[] = {
      {[](CheckpointShape* s) { s->step = 20; }, "step 40 (expected 20)"},
      {[](CheckpointShape* s) { s->server_rank = 0; }, "server rank 1 (expected 0)"},
      {[](CheckpointShape* s) { s->num_servers = 3; }, "number of servers 2 (expected 3)"},
      {[](CheckpointShape* s) { s->table = "other"; }, "table 'train/embedding' (expected 'other')"},
      {[](CheckpointShape* s) { s->job_id = 1; }, "job id 1234abcd5678ef00 (expected 0000000000000001"},
  };
  for (const auto& c : cases) {
    CheckpointShape expected = shardShape();
    c.change(&expected);
    auto refused = readCheckpointFile(path, expected, 1 << 20);
    REQUIRE_FALSE(refused.ok());
    INFO(refused.status().message());
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK(refused.status().message().find(path + " belongs to another job shape, refused") != std::string::npos);
    CHECK(refused.status().message().find(c.message) != std::string::npos);
  }
  // Zero servers expected: any number (the re-sharding reader learns it from the file).
  CheckpointShape any = shardShape();
  any.num_servers = 0;
  CHECK(readCheckpointFile(path, any, 1 << 20).ok());
  CheckpointShape dense = shardShape();
  dense.kind = CheckpointKind::kDenseModel;
  CHECK_FALSE(readCheckpointFile(path, dense, 1 << 20).ok());
}

TEST_CASE("checkpoint: damaged, oversized, foreign and special files are refused with the reason") {
  ScratchFolder dir;
  const std::string path = dir.path + "/shard.ckpt";
  REQUIRE(writeCheckpointFile(path, shardShape(), std::string(1000, 'x')).ok());
  const std::string good = slurp(path);
  auto refusal = [&](const std::string& bytes, uint64_t max = 1 << 20) {
    spit(path, bytes);
    auto f = readCheckpointFile(path, shardShape(), max);
    REQUIRE_FALSE(f.ok());
    CHECK(f.status().code() == StatusCode::kInvalidArgument);
    return f.status().message();
  };
  std::string flipped = good;
  flipped[20] ^= 1;  // inside the step
  CHECK(refusal(flipped).find("header CRC mismatch") != std::string::npos);
  std::string body = good;
  body[body.size() - 1] ^= 1;
  CHECK(refusal(body).find("CRC mismatch") != std::string::npos);
  CHECK(refusal(good.substr(0, good.size() - 1)).find("(truncated?)") != std::string::npos);
  CHECK(refusal(good.substr(0, 30)).find("only 30 bytes") != std::string::npos);
  CHECK(refusal(good, 999).find("more than the 999 this reader may hold") != std::string::npos);
  std::string v1 = good;
  v1[8] = 1;  // the version
  CHECK(refusal(v1).find("has format version 1, which this zps no longer reads (it reads version 2)") !=
        std::string::npos);
  std::string huge_name = good;
  const uint32_t len = 0xFFFFFFF0u;
  std::memcpy(huge_name.data() + 40, &len, 4);  // the table name length
  CHECK(refusal(huge_name).find("table name length") != std::string::npos);

  REQUIRE(mkfifo((dir.path + "/fifo").c_str(), 0600) == 0);
  auto fifo = readCheckpointFile(dir.path + "/fifo", shardShape(), 1 << 20);
  CHECK(fifo.status().message().find("is not a regular file") != std::string::npos);
  CHECK(readCheckpointFile(dir.path + "/missing", shardShape(), 1 << 20).status().code() == StatusCode::kNotFound);
}

TEST_CASE("checkpoint folder: one job id for every node, a bounded `latest`, a writability check") {
  ScratchFolder dir;
  const std::string folder = dir.path + "/ckpt";
  auto a = prepareCheckpointDir(folder);
  auto b = prepareCheckpointDir(folder);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  CHECK(slurp(folder + "/job-id").size() == 17);
  spit(folder + "/job-id", "not hex\n");
  CHECK(prepareCheckpointDir(folder).status().message().find("not a job id of 16 hex digits") != std::string::npos);

  CHECK(readLatestStep(folder).status().code() == StatusCode::kNotFound);
  REQUIRE(writeLatestStep(folder, 120).ok());
  auto latest = readLatestStep(folder);
  REQUIRE(latest.ok());
  CHECK(*latest == 120);
  spit(folder + "/latest", "12x\n");
  CHECK(readLatestStep(folder).status().message().find("not a step number") != std::string::npos);
  spit(folder + "/latest", std::string(1 << 20, '7'));
  CHECK(readLatestStep(folder).status().message().find("longer than 64 bytes") != std::string::npos);

  spit(dir.path + "/file", "x");
  auto under_file = prepareCheckpointDir(dir.path + "/file/ckpt");
  CHECK(under_file.status().code() == StatusCode::kInvalidArgument);
  CHECK(under_file.status().message().find("cannot create the checkpoint folder") != std::string::npos);
}

TEST_CASE("checkpoint folder: retention removes only steps older than the one `latest` names") {
  ScratchFolder dir;
  for (int step : {10, 20, 30, 40}) spit(dir.path + "/dense-step-" + std::to_string(step) + ".ckpt", "x");
  spit(dir.path + "/dense-step-x.ckpt", "x");
  auto step_of = [](const std::string& name) { return stepInFileName(name, "dense-step-", ".ckpt"); };
  CHECK(removeStepsBeforeLatest(dir.path, step_of) == 0);  // no `latest`: nothing goes
  REQUIRE(writeLatestStep(dir.path, 30).ok());
  CHECK(removeStepsBeforeLatest(dir.path, step_of) == 2);
  CHECK_FALSE(std::filesystem::exists(dir.path + "/dense-step-10.ckpt"));
  CHECK(std::filesystem::exists(dir.path + "/dense-step-30.ckpt"));
  CHECK(std::filesystem::exists(dir.path + "/dense-step-40.ckpt"));
  CHECK(std::filesystem::exists(dir.path + "/dense-step-x.ckpt"));
  CHECK_FALSE(stepInFileName("dense-step-.ckpt", "dense-step-", ".ckpt").has_value());
  CHECK_FALSE(stepInFileName("dense-step-99999999999999999999.ckpt", "dense-step-", ".ckpt").has_value());
}

}  // namespace
}  // namespace zps
