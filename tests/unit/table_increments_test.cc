// Incremental table checkpoints (server/table_checkpoint.h): a table restored from a full shard and
// its increments holds exactly, bit for bit, what a full checkpoint of the same state holds, evictions
// included; an increment after 1% of the rows changed is at most 1/20 of a full shard; retention keeps
// every file the committed step's chain needs; damaged chains are refused with a clear error.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "ps/common/checkpoint.h"
#include "server/param_store.h"
#include "server/table_checkpoint.h"
#include "tests/unit/scratch_folder.h"
#include "tests/unit/table_store_fixture.h"

namespace zps {
namespace {

using testing::ScratchFolder;
using testing::TableDriver;
using testing::TableOptions;

constexpr uint64_t kJob = 0x5eed;
constexpr uint32_t kDim = 4;
constexpr uint64_t kLargeCap = uint64_t{1} << 32;
const TableLayout kAdamLayout{"emb", kDim, static_cast<uint32_t>(kernels::OptimizerKind::kAdam), 2};

auto noLimit = [](uint64_t) { return Status::OK(); };

// The rows of the table as checkpointed at `step` in `dir`, ordered by key.
TableRows readRows(const std::string& dir, uint64_t step, const TableLayout& layout = kAdamLayout) {
  TableRows got;
  auto report = readTableShards(ShardPlace{dir, 0, 1, kJob}, layout, step, 1 << 26, noLimit, &got);
  REQUIRE(report.ok());
  std::map<uint64_t, size_t> order;
  for (size_t i = 0; i < got.keys.size(); ++i) order[got.keys[i]] = i;
  const size_t sc = size_t{layout.state_floats} * layout.dim;
  TableRows sorted;
  for (const auto& [key, i] : order) {
    sorted.keys.push_back(key);
    sorted.steps.push_back(got.steps[i]);
    sorted.values.insert(sorted.values.end(), got.values.begin() + i * layout.dim,
                         got.values.begin() + (i + 1) * layout.dim);
    sorted.state.insert(sorted.state.end(), got.state.begin() + i * sc, got.state.begin() + (i + 1) * sc);
  }
  return sorted;
}

bool sameRows(const TableRows& a, const TableRows& b) {
  auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  return same(a.keys, b.keys) && same(a.steps, b.steps) && same(a.values, b.values) && same(a.state, b.state);
}

// Keys of round r: a sliding window over 0..59 (so rows age out and are evicted under a budget of
// 40) plus a few ids spread over 64 bits.
std::vector<uint64_t> keysOf(uint64_t r) {
  std::vector<uint64_t> keys;
  for (uint64_t i = 0; i < 12; ++i) keys.push_back((r * 5 + i) % 60);
  keys.push_back(0xF000000000000000ull + r % 3);
  return keys;
}

TEST_CASE("server tables: a base plus increments restores exactly what a full checkpoint holds") {
  for (uint64_t budget_rows : {uint64_t{0}, uint64_t{40}}) {
    CAPTURE(budget_rows);
    ScratchFolder incremental, full;
    const uint64_t row_bytes = RowStore::rowBytes(kDim, 2, RowFormat::kFloat32);
    MemoryBudget budget_a(kLargeCap, TableRowPolicy{budget_rows * row_bytes, RowFormat::kFloat32});
    MemoryBudget budget_b(kLargeCap, TableRowPolicy{budget_rows * row_bytes, RowFormat::kFloat32});
    const TableOptions adam{kernels::OptimizerKind::kAdam, kDim, 0};
    TableDriver a(ShardPlace{incremental.path, 0, 1, kJob, /*checkpoint_increments=*/3}, &budget_a, adam);
    TableDriver b(ShardPlace{full.path, 0, 1, kJob, /*checkpoint_increments=*/0}, &budget_b, adam);
    for (uint64_t r = 1; r <= 16; ++r) {
      REQUIRE(a.push(keysOf(r)).data.has_reply());
      REQUIRE(b.push(keysOf(r)).data.has_reply());
      if (r % 2 == 0) {  // checkpoints at 2 (full), 4, 6, 8 (increments), 10 (full), 12, 14, 16
        REQUIRE(a.checkpoint().data.has_reply());
        REQUIRE(b.checkpoint().data.has_reply());
        const TableRows chain = readRows(incremental.path, r), whole = readRows(full.path, r);
        REQUIRE(sameRows(chain, whole));
        REQUIRE(chain.keys.size() == a.counts().rows);
        CHECK(tableRowsChecksum(kAdamLayout, chain.ref()) == tableRowsChecksum(kAdamLayout, whole.ref()));
      }
    }
    if (budget_rows > 0) CHECK(a.counts().evicted > 0);
    CHECK(a.counts().checkpoint_rows < b.counts().checkpoint_rows);  // step 16 was an increment
    // A store restored from the chain serves what the store that wrote it serves.
    MemoryBudget budget_c(kLargeCap, TableRowPolicy{budget_rows * row_bytes, RowFormat::kFloat32});
    TableDriver c(ShardPlace{incremental.path, 0, 1, kJob, 3}, &budget_c,
                  TableOptions{kernels::OptimizerKind::kAdam, kDim, /*restore_step=*/16});
    REQUIRE(c.declared().data.has_reply());
    // The rows round 16 used: every one is held by the writer and restored from the chain.
    const auto expected = b.pull(keysOf(16)), restored = c.pull(keysOf(16));
    CHECK(std::memcmp(expected.data(), restored.data(), expected.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("server tables: an increment after 1% of the rows changed is at most 1/20 of a full shard") {
  ScratchFolder dir;
  MemoryBudget budget(kLargeCap);
  const uint32_t dim = 16;
  TableDriver t(ShardPlace{dir.path, 0, 1, kJob, 4}, &budget, TableOptions{kernels::OptimizerKind::kAdam, dim, 0});
  std::vector<uint64_t> keys(20000);
  for (uint64_t i = 0; i < keys.size(); ++i) keys[i] = i * 0x9E3779B97F4A7C15ull;
  REQUIRE(t.push(keys).data.has_reply());
  REQUIRE(t.checkpoint().data.has_reply());  // step 1: full
  keys.resize(keys.size() / 100);
  REQUIRE(t.push(keys).data.has_reply());
  REQUIRE(t.checkpoint().data.has_reply());  // step 2: the 1% that changed
  const auto full = std::filesystem::file_size(tableShardPath(dir.path, "emb", 0, 1));
  const auto increment = std::filesystem::file_size(tableShardPath(dir.path, "emb", 0, 2));
  std::printf(
      "table of 20000 rows (dim 16, adam): full shard %llu bytes, increment after 1%% changed %llu bytes "
      "(1/%.1f)\n",
      static_cast<unsigned long long>(full), static_cast<unsigned long long>(increment),
      static_cast<double>(full) / static_cast<double>(increment));
  CHECK(increment * 20 <= full);
  CHECK(t.counts().checkpoint_rows == 200);
}

TEST_CASE("server tables: retention keeps the chain of the committed step") {
  ScratchFolder dir;
  MemoryBudget budget(kLargeCap);
  TableDriver t(ShardPlace{dir.path, 0, 1, kJob, 2}, &budget);
  auto exists = [&](uint64_t step) { return std::filesystem::exists(tableShardPath(dir.path, "emb", 0, step)); };
  // Steps 1 (full), 2, 3 (increments), 4 (full), 5 (increment). Each checkpoint asked for commits
  // the one before it (worker 0 writes `latest` before asking for the next).
  for (uint64_t step = 1; step <= 5; ++step) {
    REQUIRE(t.push({step, 100}).data.has_reply());
    REQUIRE(t.checkpoint().data.has_reply());
    if (step == 3) CHECK((exists(1) && exists(2) && exists(3)));  // committed 2 builds on 1
  }
  // Committed 4 is a full shard: the chain of 1 goes.
  CHECK_FALSE(exists(1));
  CHECK_FALSE(exists(2));
  CHECK_FALSE(exists(3));
  CHECK((exists(4) && exists(5)));
  const TableLayout sgd{"emb", kDim, static_cast<uint32_t>(kernels::OptimizerKind::kSgd), 0};
  CHECK(readRows(dir.path, 5, sgd).keys.size() == 6);
}

TEST_CASE("server tables: damaged increment chains are refused with a clear error") {
  ScratchFolder dir;
  const ShardPlace place{dir.path, 0, 1, kJob};
  const TableLayout sgd{"emb", 2, static_cast<uint32_t>(kernels::OptimizerKind::kSgd), 0};
  TableRows rows;
  rows.keys = {3, 4};
  rows.steps = {1, 1};
  rows.values = {1, 2, 3, 4};
  auto restore = [&](uint64_t step) {
    TableRows got;
    return readTableShards(place, sgd, step, 1 << 20, noLimit, &got).status();
  };
  // An increment whose base is missing.
  REQUIRE(writeTableIncrement(place, sgd, rows.ref(), {}, 5, 6, 0).ok());
  Status s = restore(6);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("builds on step 5, whose shard is missing"));
  // With its base it restores, removals applied before the rows.
  REQUIRE(writeTableShard(place, sgd, rows.ref(), 5, 0).ok());
  TableRows changed;
  changed.keys = {4};
  changed.steps = {2};
  changed.values = {7, 8};
  REQUIRE(writeTableIncrement(place, sgd, changed.ref(), {3, 4}, 5, 6, 0).ok());
  TableRows got = readRows(dir.path, 6, sgd);
  CHECK(got.keys == std::vector<uint64_t>{4});
  CHECK(got.values == std::vector<float>{7, 8});
  // An increment that builds on itself (a loop), and one whose removed count overruns it: written by
  // hand, as a damaged or hostile file would be.
  auto writeRaw = [&](uint64_t step, uint64_t previous, uint64_t removed) {
    PayloadWriter w;
    w.put(uint32_t{3});
    w.putBytes("emb", 3);
    w.put(sgd.dim);
    w.put(sgd.optimizer_kind);
    w.put(sgd.state_floats);
    w.put(previous);
    w.put(removed);
    w.put(uint64_t{0});
    CheckpointShape shape;
    shape.kind = CheckpointKind::kParamTableIncrement;
    shape.step = step;
    shape.server_rank = 0;
    shape.num_servers = 1;
    shape.table = "emb";
    shape.job_id = kJob;
    REQUIRE(writeCheckpointFile(tableShardPath(dir.path, "emb", 0, step), shape, w.take()).ok());
  };
  writeRaw(7, 7, 0);
  s = restore(7);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("builds on step 7, not an earlier one"));
  writeRaw(8, 6, uint64_t{1} << 60);
  s = restore(8);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("removed count 1152921504606846976 does not match its size"));
  CHECK_THAT(restore(9).message(), Catch::Contains("does not exist"));
}

}  // namespace
}  // namespace zps
