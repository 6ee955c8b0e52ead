// Tests for reading format version 1 (ps/common/checkpoint_v1.h): a file as the old writer wrote it
// reads back with its kind, step and payload; a damaged one is refused by name; version 2 readers
// refuse it with the upgrade command to run.
#include "ps/common/checkpoint_v1.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "tests/unit/scratch_folder.h"
#include "tests/unit/version1_writer.h"

namespace zps {
namespace {

using testing::ScratchFolder;

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_CASE("checkpoint v1: an old file reads back, and a damaged one is refused naming it") {
  ScratchFolder dir;
  const std::string path = dir.path + "/dense-step-40.ckpt";
  const std::string good = testing::version1Bytes(CheckpointKind::kDenseModel, 40, std::string(100, 'w'));
  spit(path, good);
  auto version = checkpointFormatVersion(path);
  REQUIRE(version.ok());
  CHECK(*version == 1);
  auto f = readVersion1CheckpointFile(path);
  REQUIRE(f.ok());
  CHECK(f->shape.kind == CheckpointKind::kDenseModel);
  CHECK(f->shape.step == 40);
  CHECK(f->payload == std::string(100, 'w'));

  auto refusal = [&](const std::string& bytes) {
    spit(path, bytes);
    auto r = readVersion1CheckpointFile(path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find(path) != std::string::npos);
    return r.status().message();
  };
  std::string body = good;
  body.back() ^= 1;
  CHECK_THAT(refusal(body), Catch::Contains("CRC mismatch"));
  CHECK_THAT(refusal(good.substr(0, good.size() - 1)), Catch::Contains("(truncated?)"));
  CHECK_THAT(refusal(good.substr(0, 20)), Catch::Contains("only 20 bytes"));
  std::string kind = good;
  kind[12] = 9;
  CHECK_THAT(refusal(kind), Catch::Contains("unknown kind 9"));
  std::string magic = good;
  magic[0] = 'X';
  CHECK_THAT(refusal(magic), Catch::Contains("bad magic"));
  CHECK(checkpointFormatVersion(path).status().code() == StatusCode::kInvalidArgument);

  REQUIRE(mkfifo((dir.path + "/fifo").c_str(), 0600) == 0);
  CHECK_THAT(readVersion1CheckpointFile(dir.path + "/fifo").status().message(),
             Catch::Contains("is not a regular file"));
  CHECK(readVersion1CheckpointFile(dir.path + "/missing").status().code() == StatusCode::kNotFound);
}

TEST_CASE("checkpoint v1: a version 2 reader refuses a version 1 file with the command that converts its folder") {
  ScratchFolder dir;
  const std::string path = dir.path + "/dense-step-40.ckpt";
  spit(path, testing::version1Bytes(CheckpointKind::kDenseModel, 40, "payload"));
  CheckpointShape expected;
  expected.step = 40;
  auto f = readCheckpointFile(path, expected, 1 << 20);
  REQUIRE_FALSE(f.ok());
  CHECK(f.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(f.status().message(), Catch::Contains("checkpoint " + path + " has format version 1") &&
                                       Catch::Contains("`zps checkpoint upgrade " + dir.path + "`"));
}

}  // namespace
}  // namespace zps
