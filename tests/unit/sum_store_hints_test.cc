// Tests for push hints (ZPS_PUSH_HINTS) on the server's side: a reply to a scheduled push names the
// open rounds that wait for the pusher alone (server/sum_store.h). The worker's side, hurry(), is in
// push_scheduler_test.cc.
#include <cstdint>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/sum_store_fixture.h"

namespace zps {
namespace {

using namespace sum_store_testing;

using KeyRounds = std::vector<std::pair<uint64_t, uint64_t>>;

KeyRounds awaitedOf(const Outgoing& o) {
  KeyRounds named;
  for (const auto& a : o.data.reply().awaited()) named.emplace_back(a.key(), a.round());
  return named;
}

// A scheduled PUSH of `key` round `round` from `worker`, asking for hints; returns its reply.
Outgoing scheduledPush(StoreFixture& f, int worker, uint64_t key, uint64_t round) {
  auto m = StoreFixture::pushMessage(pb::CMD_PUSH, key, round, DType::kFloat32, pushValues(worker, round));
  m.data.mutable_tensor()->set_wants_awaited(true);
  auto out = f.send(worker, m);
  REQUIRE(!out.empty());
  REQUIRE(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  return out[0];
}

TEST_CASE("push hints: a push's reply names the rounds that wait for the pusher alone, lowest key first",
          "[push_hints]") {
  StoreFixture f;
  for (uint64_t key : {1, 2, 3, 4}) declareAll(f, key);
  // Workers 0 and 1 are ahead: 0 pushed keys 4, 3 and 2 of round 1, and 1 pushed keys 4 and 3.
  for (uint64_t key : {4, 3, 2}) scheduledPush(f, 0, key, 1);
  for (uint64_t key : {4, 3}) scheduledPush(f, 1, key, 1);
  // Keys 3 and 4 wait for worker 2 alone; key 2 waits for two workers and is not named.
  CHECK(awaitedOf(scheduledPush(f, 2, 1, 1)) == KeyRounds{{3, 1}, {4, 1}});
  // Worker 1 has pushed every round that waits for it alone: nothing is named.
  CHECK(awaitedOf(scheduledPush(f, 1, 2, 1)) == KeyRounds{});
  // Key 2 now waits for worker 2 alone too; key 4 completes with this push and is not named.
  CHECK(awaitedOf(scheduledPush(f, 2, 4, 1)) == KeyRounds{{2, 1}, {3, 1}});
  CHECK(awaitedOf(scheduledPush(f, 0, 1, 1)) == KeyRounds{});
  CHECK(awaitedOf(scheduledPush(f, 1, 3, 1)) == KeyRounds{{1, 1}});
  // A push that does not ask is answered without hints.
  CHECK(awaitedOf(f.push(2, 1, pushValues(2, 1), pb::CMD_PUSH, 3)[0]) == KeyRounds{});
  // Rounds of the next iteration are named with their own round number.
  scheduledPush(f, 0, 4, 2);
  scheduledPush(f, 1, 4, 2);
  CHECK(awaitedOf(scheduledPush(f, 2, 2, 1)) == KeyRounds{{4, 2}});
}

TEST_CASE("push hints: a reply names at most kMaxAwaitedRounds rounds", "[push_hints]") {
  StoreFixture f;
  const uint64_t keys = wire::kMaxAwaitedRounds + 5;
  for (uint64_t key = 1; key <= keys + 1; ++key) declareAll(f, key);
  for (int w : {0, 1})
    for (uint64_t key = 1; key <= keys; ++key) scheduledPush(f, w, key, 1);
  const KeyRounds named = awaitedOf(scheduledPush(f, 2, keys + 1, 1));
  REQUIRE(named.size() == static_cast<size_t>(wire::kMaxAwaitedRounds));
  CHECK(named.front() == std::make_pair(uint64_t{1}, uint64_t{1}));
  CHECK(named.back() == std::make_pair(uint64_t{wire::kMaxAwaitedRounds}, uint64_t{1}));
}

TEST_CASE("push hints: with two workers nothing is named", "[push_hints]") {
  // The one other worker's order is no consensus; following it measured slower.
  StoreFixture f(2);
  for (uint64_t key : {1, 2})
    for (int w = 0; w < 2; ++w) REQUIRE(f.declare(w, key, kElems).size() == 1);
  scheduledPush(f, 0, 1, 1);
  CHECK(awaitedOf(scheduledPush(f, 1, 2, 1)) == KeyRounds{});
}

TEST_CASE("push hints: sums stay exact whatever the order hints lead to", "[push_hints]") {
  StoreFixture f;
  declareAll(f, kKey);
  for (int w : {2, 0, 1}) scheduledPush(f, w, kKey, 1);
  auto out = f.pull(1, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 1, 1, expectedSum(1));
}

}  // namespace
}  // namespace zps
