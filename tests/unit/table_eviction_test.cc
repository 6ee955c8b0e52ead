// Server tables that outgrow memory (server/param_store.h, row_store.h): under ZPS_TABLE_MEMORY_BYTES
// the least recently used row is evicted and comes back, when touched again, exactly at its initial
// value; a stream of ever-new ids (any 64-bit value) holds the budget with every eviction counted; a
// request that cannot fit is refused and the store keeps serving; the metrics endpoint counts rows held,
// created and evicted per table; float16 and bfloat16 rows hold exactly the float32 result rounded to
// nearest even, with float32 optimizer state.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/optimizer.h"
#include "kernels/reducer.h"
#include "ps/node/metrics.h"
#include "server/param_store.h"
#include "tests/unit/table_store_fixture.h"

namespace zps {
namespace {

using testing::TableDriver;
using testing::TableOptions;

constexpr uint32_t kDim = 4;
constexpr uint64_t kLargeCap = uint64_t{1} << 32;

std::vector<float> initialRow(uint64_t key) {
  std::vector<float> row(kDim);
  kernels::initEmbeddingRow(key, 3, 0.5f, row.data(), kDim);
  return row;
}

// Row `key` after SGD (lr 0.5) applied the gradients of `rounds`, from its initial value.
std::vector<float> sgdRow(uint64_t key, const std::vector<uint64_t>& rounds) {
  std::vector<float> row = initialRow(key);
  kernels::OptimizerConfig sgd;
  sgd.kind = kernels::OptimizerKind::kSgd;
  sgd.lr = 0.5f;
  uint64_t step = 0;
  for (uint64_t r : rounds) {
    float g[kDim];
    for (uint32_t j = 0; j < kDim; ++j) g[j] = TableDriver::grad(key, r, j);
    kernels::applyOptimizer(sgd, row.data(), nullptr, g, kDim, ++step);
  }
  return row;
}

bool sameBits(const std::vector<float>& a, const float* b) {
  return std::memcmp(a.data(), b, a.size() * sizeof(float)) == 0;
}

const uint64_t kRowBytes = RowStore::rowBytes(kDim, 0, RowFormat::kFloat32);

// A series of table 'emb' on this process's metrics endpoint (0 when absent).
double tableMetric(const std::string& name) {
  const std::string text = metrics::metrics().exposition();
  const std::string series = name + "{table=\"emb\"} ";
  const size_t at = text.find(series);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size()));
}

TEST_CASE("server tables: the least recently used row is evicted and returns at its initial value") {
  MemoryBudget budget(kLargeCap, TableRowPolicy{4 * kRowBytes, RowFormat::kFloat32});
  TableDriver t(ShardPlace{}, &budget);
  // Ids anywhere in 64 bits: hashed features need no vocabulary.
  const uint64_t a = 1, b = 0xFFFFFFFFFFFFFFFFull, c = 0x8000000000000000ull, d = 12345678901234567ull;
  REQUIRE(t.push({a, b, c, d}).data.has_reply());  // round 1 updates all four
  t.pull({a});                                     // a is now the most recent
  CHECK(t.counts().rows == 4);
  CHECK(t.counts().evicted == 0);
  // Round 2's new row evicts the least recently used: b, c and d were last used together (round 1),
  // created in key order (d < c < b), so d is the oldest.
  REQUIRE(t.push({7}).data.has_reply());
  CHECK(t.counts().rows == 4);
  CHECK(t.counts().created == 5);
  CHECK(t.counts().evicted == 1);
  CHECK(budget.rowsUsed() == 4 * kRowBytes);
  auto rows = t.pull({a, 7, b, c});  // use order now: a, 7, b, c
  CHECK(sameBits(sgdRow(a, {1}), rows.data()));
  CHECK(sameBits(sgdRow(7, {2}), rows.data() + kDim));
  CHECK(sameBits(sgdRow(b, {1}), rows.data() + 2 * kDim));
  CHECK(sameBits(sgdRow(c, {1}), rows.data() + 3 * kDim));
  // d comes back at its initial value (its round-1 update is gone) and evicts a, which then comes
  // back at its initial value too, evicting 7.
  CHECK(sameBits(initialRow(d), t.pull({d}).data()));
  CHECK(t.counts().evicted == 2);
  CHECK(sameBits(initialRow(a), t.pull({a}).data()));
  CHECK(t.counts().created == 7);
  CHECK(t.counts().evicted == 3);
  CHECK(t.counts().rows == 4);
  // A pushed row evicted is updated from its initial value when it returns.
  REQUIRE(t.push({7}).data.has_reply());  // round 3: 7 returns, evicting b
  CHECK(sameBits(sgdRow(7, {3}), t.pull({7}).data()));
  CHECK(t.store().counters().rows_evicted == t.counts().evicted);
}

TEST_CASE("server tables: a stream of new ids holds the budget, every eviction counted") {
  constexpr uint64_t kRowsBudget = 1000;
  MemoryBudget budget(kLargeCap, TableRowPolicy{kRowsBudget * kRowBytes, RowFormat::kFloat32});
  const double created_before = tableMetric("zps_server_table_rows_created_total");
  const double evicted_before = tableMetric("zps_server_table_rows_evicted_total");
  TableDriver t(ShardPlace{}, &budget);
  uint64_t next = 0x9E3779B97F4A7C15ull;
  uint64_t pushed = 0;
  for (int round = 0; round < 60; ++round) {
    std::vector<uint64_t> keys(500);
    for (auto& k : keys) k = next += 0x9E3779B97F4A7C15ull;  // 30,000 distinct ids spread over 64 bits
    REQUIRE(t.push(keys).data.has_reply());
    pushed += keys.size();
    const auto counts = t.counts();
    REQUIRE(counts.rows <= kRowsBudget);
    REQUIRE(budget.rowsUsed() <= kRowsBudget * kRowBytes);
    REQUIRE(counts.created == pushed);
    REQUIRE(counts.evicted == pushed - counts.rows);
  }
  CHECK(t.counts().rows == kRowsBudget);
  CHECK(t.counts().evicted == 30000 - kRowsBudget);
  CHECK(t.counts().bytes == kRowsBudget * kRowBytes);
  // The metrics endpoint shows the same counts (no other store of a table 'emb' is alive now).
  CHECK(tableMetric("zps_server_table_rows") == kRowsBudget);
  CHECK(tableMetric("zps_server_table_rows_created_total") - created_before == 30000);
  CHECK(tableMetric("zps_server_table_rows_evicted_total") - evicted_before == 30000 - kRowsBudget);
}

TEST_CASE("server tables: a request larger than the whole budget is refused and the store keeps serving") {
  MemoryBudget budget(kLargeCap, TableRowPolicy{3 * kRowBytes, RowFormat::kFloat32});
  TableDriver t(ShardPlace{}, &budget);
  REQUIRE(t.push({1, 2}).data.has_reply());
  Outgoing refused = t.push({3, 4, 5, 6});
  REQUIRE(wire::commandOf(refused.data) == pb::CMD_ERROR);
  CHECK_THAT(refused.data.error().text(), Catch::Contains("4 new rows of table 'emb' need"));
  CHECK_THAT(refused.data.error().text(), Catch::Contains("ZPS_TABLE_MEMORY_BYTES=" + std::to_string(3 * kRowBytes)));
  // Nothing was evicted for the refused request, and the table still answers.
  auto rows = t.pull({1, 2});
  CHECK(sameBits(sgdRow(1, {1}), rows.data()));
  CHECK(sameBits(sgdRow(2, {1}), rows.data() + kDim));
  CHECK(t.counts().evicted == 0);
}

float roundTo(RowFormat format, float v) {
  return format == RowFormat::kFloat16 ? kernels::halfToFloat(kernels::floatToHalf(v))
                                       : kernels::bfloat16ToFloat(kernels::floatToBfloat16(v));
}

TEST_CASE("server tables: float16 and bfloat16 rows are the float32 update rounded, state in float32") {
  for (RowFormat format : {RowFormat::kFloat16, RowFormat::kBfloat16}) {
    for (auto kind : {kernels::OptimizerKind::kSgd, kernels::OptimizerKind::kAdam}) {
      CAPTURE(rowFormatName(format), static_cast<int>(kind));
      MemoryBudget budget(kLargeCap, TableRowPolicy{0, format});
      TableDriver t(ShardPlace{}, &budget, TableOptions{kind, kDim, 0});
      const std::vector<uint64_t> keys = {5, 6};
      // The server's arithmetic, one row at a time: stored rounded, widened, updated with float32
      // state, rounded again.
      kernels::OptimizerConfig config;
      config.kind = kind;
      config.lr = 0.5f;
      config.momentum = 0.9f;
      config.beta1 = 0.9f;
      config.beta2 = 0.999f;
      config.eps = 1e-8f;
      config.initial_accumulator = 0.1f;
      const size_t state_count = kernels::optimizerStateFloats(kind) * kDim;
      std::vector<std::vector<float>> values, state;
      for (uint64_t key : keys) {
        values.push_back(initialRow(key));
        for (float& v : values.back()) v = roundTo(format, v);
        state.emplace_back(state_count);
        if (state_count > 0) kernels::initOptimizerState(config, state.back().data(), kDim);
      }
      for (uint64_t round = 1; round <= 3; ++round) {
        REQUIRE(t.push(keys).data.has_reply());
        for (size_t i = 0; i < keys.size(); ++i) {
          float g[kDim];
          for (uint32_t j = 0; j < kDim; ++j) g[j] = TableDriver::grad(keys[i], round, j);
          kernels::applyOptimizer(config, values[i].data(), state[i].data(), g, kDim, round);
          for (float& v : values[i]) v = roundTo(format, v);
        }
      }
      auto rows = t.pull(keys);
      CHECK(sameBits(values[0], rows.data()));
      CHECK(sameBits(values[1], rows.data() + kDim));
      CHECK(t.counts().bytes == 2 * RowStore::rowBytes(kDim, static_cast<uint32_t>(state_count / kDim), format));
    }
  }
}

}  // namespace
}  // namespace zps
