// Tests for Tables (worker/tables.h): rows split by the server that holds them, pulled rows put
// back in the caller's order, a push to every server each round, and checkpoints.
#include "worker/tables.h"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

#include "tests/unit/instant_servers.h"

namespace zps {
namespace {

using namespace std::chrono_literals;

// Three servers whose rows hold their key in every column; they record which keys reached them.
struct ThreeServers {
  testing::InstantServers f;
  std::map<int, std::vector<uint64_t>> keys_at;
  Config config;
  Tables tables{config, &f.table, nullptr};

  ThreeServers() {
    config.num_servers = 3;
    f.payload = [this](int server, const wire::DataMessage& m) {
      std::vector<float> rows;
      std::vector<uint64_t> keys(m.keys.size() / sizeof(uint64_t));
      if (!keys.empty()) std::memcpy(keys.data(), m.keys.data(), m.keys.size());
      keys_at[server].insert(keys_at[server].end(), keys.begin(), keys.end());
      for (uint64_t k : keys) {
        if (wire::commandOf(m.data) == pb::CMD_PULL_ROWS)
          rows.insert(rows.end(), m.data.rows().row_dim(), static_cast<float>(k));
      }
      return rows;
    };
  }
};

TEST_CASE(
    "tables: pulled rows come back in the caller's order from the "
    "servers that hold them",
    "[tables]") {
  ThreeServers t;
  auto& [f, keys_at, config, tables] = t;
  TableOptions options;
  options.dim = 2;
  auto id = tables.declare("emb", options, 4);
  REQUIRE(id.ok());
  REQUIRE(f.seen.size() == 3);  // a DECLARE to every server
  CHECK(wire::keyOf(f.seen[0]) == (uint64_t{4 + (1 << 29)} << 24));
  const std::vector<uint64_t> keys = {11, 5, 42, 7, 1000};
  std::vector<float> out(keys.size() * 2, -1.0f);
  auto h = tables.pullRows(*id, keys.data(), keys.size(), out.data());
  REQUIRE(h.ok());
  CHECK(f.table.wait(*h, 1s).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    CHECK(out[2 * i] == static_cast<float>(keys[i]));
    CHECK(out[2 * i + 1] == static_cast<float>(keys[i]));
  }
  for (const auto& [server, held] : keys_at) {
    for (uint64_t k : held) CHECK(tables.serverOfRow(k) == server);
  }
}

TEST_CASE(
    "tables: every server gets a push each round, and pulls wait for the "
    "latest",
    "[tables]") {
  ThreeServers t;
  auto& [f, keys_at, config, tables] = t;
  auto id = tables.declare("emb", TableOptions(), 0);
  REQUIRE(id.ok());
  f.seen.clear();
  const uint64_t key = 9;
  std::vector<float> grad(8, 0.5f);
  auto h = tables.pushRows(*id, &key, 1, grad.data());
  REQUIRE(h.ok());
  CHECK(f.table.wait(*h, 1s).ok());
  REQUIRE(f.seen.size() == 3);
  for (const auto& s : f.seen) CHECK(wire::roundOf(s) == 1);
  f.seen.clear();
  std::vector<float> out(8);
  h = tables.pullRows(*id, &key, 1, out.data());
  REQUIRE(h.ok());
  CHECK(f.table.wait(*h, 1s).ok());
  REQUIRE(f.seen.size() == 1);
  CHECK(wire::roundOf(f.seen[0]) == 2);
  CHECK(tables.checkpoint(5).ok());
  CHECK(tables.pullRows(3, &key, 1, out.data()).status().code() == StatusCode::kInvalidArgument);
  TableOptions bad;
  bad.dim = 0;
  CHECK(tables.declare("bad", bad, 0).status().message() == "table 'bad': dim must be 1..65536");
}

}  // namespace
}  // namespace zps
