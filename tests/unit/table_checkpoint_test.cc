// Tests for table shards (server/table_checkpoint.h): a table checkpointed by 2 servers is read
// back whole by 1 server and by 3 (each keeping the rows it owns now, the same rows and checksum in
// total), shards of another layout or job are refused by name, and retention never removes the
// committed step however many newer shards (SIGTERM's final checkpoints) follow it.
#include "server/table_checkpoint.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <map>

#include "ps/common/checkpoint_dir.h"
#include "ps/common/row_placement.h"
#include "tests/unit/scratch_folder.h"

namespace zps {
namespace {

using testing::ScratchFolder;

const TableLayout kLayout{"train/embedding", 3, /*optimizer_kind=*/3, /*state_floats=*/1};
constexpr uint64_t kJob = 77;

// Rows 0..n-1 with values and state that depend on the key, split by owner under `servers`.
std::vector<TableRows> splitRows(uint64_t n, int servers) {
  std::vector<TableRows> shards(static_cast<size_t>(servers));
  for (uint64_t key = 0; key < n; ++key) {
    TableRows& t = shards[static_cast<size_t>(serverOfRow(key * 7919, servers))];
    t.keys.push_back(key * 7919);
    t.steps.push_back(key % 5);
    for (int j = 0; j < 3; ++j) {
      t.values.push_back(static_cast<float>(key) + 0.25f * static_cast<float>(j));
      t.state.push_back(static_cast<float>(key) * 0.5f + static_cast<float>(j));
    }
  }
  return shards;
}

ShardPlace place(const std::string& dir, uint32_t rank, uint32_t servers) { return {dir, rank, servers, kJob}; }

auto noLimit = [](uint64_t) { return Status::OK(); };

TEST_CASE("table shards: a 2-server checkpoint restores whole with 1 server and with 3 (re-sharding)") {
  ScratchFolder dir;
  const auto written = splitRows(1000, 2);
  uint64_t checksum = 0;
  for (uint32_t r = 0; r < 2; ++r) {
    REQUIRE(writeTableShard(place(dir.path, r, 2), kLayout, written[r].ref(), 40, 0).ok());
    checksum += tableRowsChecksum(kLayout, written[r].ref());
  }
  for (uint32_t servers : {1u, 2u, 3u}) {
    uint64_t rows = 0, sum = 0;
    for (uint32_t r = 0; r < servers; ++r) {
      TableRows got;
      uint64_t reserved = 0;
      auto report = readTableShards(
          place(dir.path, r, servers), kLayout, 40, 1 << 20,
          [&](uint64_t n) {
            reserved += n;
            return Status::OK();
          },
          &got);
      REQUIRE(report.ok());
      CHECK(report->old_servers == 2);
      CHECK(report->shards_read == (servers == 2 ? 1u : 2u));
      CHECK(reserved == got.keys.size());
      for (uint64_t k : got.keys) CHECK(serverOfRow(k, static_cast<int>(servers)) == static_cast<int>(r));
      rows += got.keys.size();
      sum += tableRowsChecksum(kLayout, got.ref());
    }
    INFO(servers << " servers");
    CHECK(rows == 1000);
    CHECK(sum == checksum);
  }
}

TEST_CASE("table shards: a missing, foreign or mislaid shard is refused with the file's name") {
  ScratchFolder dir;
  const auto written = splitRows(200, 2);
  for (uint32_t r = 0; r < 2; ++r)
    REQUIRE(writeTableShard(place(dir.path, r, 2), kLayout, written[r].ref(), 40, 0).ok());
  auto restore = [&](uint32_t rank, uint32_t servers, uint64_t step = 40, uint64_t job = kJob) {
    TableRows got;
    ShardPlace p = place(dir.path, rank, servers);
    p.job_id = job;
    auto r = readTableShards(p, kLayout, step, 1 << 20, noLimit, &got);
    REQUIRE_FALSE(r.ok());
    return r.status().message();
  };
  CHECK(restore(0, 2, 41).find("-server-0-step-41.ckpt does not exist") != std::string::npos);
  CHECK(restore(0, 2, 40, 5).find("job id 000000000000004d (expected 0000000000000005") != std::string::npos);
  // Server 1's shard swapped in for server 0's: its header says so.
  std::filesystem::copy_file(tableShardPath(dir.path, kLayout.name, 1, 40),
                             tableShardPath(dir.path, kLayout.name, 0, 40),
                             std::filesystem::copy_options::overwrite_existing);
  CHECK(restore(0, 2).find("server rank 1 (expected 0)") != std::string::npos);
  // Re-sharding needs every old shard.
  REQUIRE(writeTableShard(place(dir.path, 0, 2), kLayout, written[0].ref(), 40, 0).ok());
  std::filesystem::remove(tableShardPath(dir.path, kLayout.name, 1, 40));
  CHECK(restore(0, 3).find("re-sharding table 'train/embedding' from 2 servers to 3") != std::string::npos);
  // Server 0's rows written as server 1's shard: re-sharding checks each row's owner under the
  // writing job's shape, so no row is taken from the wrong shard.
  REQUIRE(writeTableShard(place(dir.path, 1, 2), kLayout, written[0].ref(), 40, 0).ok());
  CHECK(restore(0, 3).find("-server-1-step-40.ckpt does not match table 'train/embedding': row ") != std::string::npos);
  CHECK(restore(0, 3).find("belongs to server 0 of 2, not to server 1 whose shard this is") != std::string::npos);
  // A layout that differs from the declared one.
  TableLayout other = kLayout;
  other.dim = 4;
  TableRows got;
  auto r = readTableShards(place(dir.path, 0, 2), other, 40, 1 << 20, noLimit, &got);
  CHECK(r.status().message().find("does not match table 'train/embedding'") != std::string::npos);
}

TEST_CASE("table shards: retention keeps the committed step through three final checkpoints") {
  ScratchFolder dir;  // no `latest` here: a server's own folder (one per pod) has none
  const auto rows = splitRows(10, 1);
  const ShardPlace p = place(dir.path, 0, 1);
  auto exists = [&](uint64_t step) { return std::filesystem::exists(tableShardPath(dir.path, kLayout.name, 0, step)); };
  // Checkpoints asked for at 10, 20, 30: asking for one means the one before is complete.
  REQUIRE(writeTableShard(p, kLayout, rows[0].ref(), 10, 0).ok());
  REQUIRE(writeTableShard(p, kLayout, rows[0].ref(), 20, 10).ok());
  REQUIRE(writeTableShard(p, kLayout, rows[0].ref(), 30, 20).ok());
  CHECK_FALSE(exists(10));
  CHECK(exists(20));
  // SIGTERM three times within one interval after a restore of 30: final shards of 33, 32, 31.
  for (uint64_t step : {33, 32, 31}) REQUIRE(writeTableShard(p, kLayout, rows[0].ref(), step, 30).ok());
  CHECK(exists(30));
  CHECK_FALSE(exists(20));
  TableRows got;
  CHECK(readTableShards(p, kLayout, 30, 1 << 20, noLimit, &got).ok());
  CHECK(got.keys.size() == 10);
  CHECK(tableShardPath(dir.path, "train/embedding", 0, 30).find("table-train_embedding-") != std::string::npos);
}

}  // namespace
}  // namespace zps
