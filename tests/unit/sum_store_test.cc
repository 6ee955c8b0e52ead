// Tests for the server's summation store (server/sum_store.cc) with the CPU reducer: exact sums
// per round whatever the arrival order, parked pulls, overlapping rounds, and how long results are
// kept. Bad requests are in sum_store_requests_test.cc, engines that hold sums in sum_store_engine_test.cc.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/sum_store_fixture.h"

namespace zps {
namespace {

using namespace sum_store_testing;

TEST_CASE("sum store: pushes of every worker are summed exactly, round after round", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  CHECK(f.store().numKeys() == 1);
  for (uint64_t r = 1; r <= 6; ++r) {
    INFO("round " << r);
    auto m = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, r, DType::kFloat32, pushValues(0, r));
    auto out = f.send(0, m);
    REQUIRE(out.size() == 1);
    checkAck(out[0], 0, r);
    CHECK(out[0].data.request_id() == m.data.request_id());
    for (int w = 1; w < kWorkers; ++w) {
      out = f.push(w, r, pushValues(w, r));
      REQUIRE(out.size() == 1);
      checkAck(out[0], w, r);
    }
    for (int w = 0; w < kWorkers; ++w) {
      auto p = StoreFixture::header(pb::CMD_PULL, kKey, r, DType::kFloat32, 0);
      out = f.send(w, p);
      REQUIRE(out.size() == 1);
      checkSumReply(out[0], w, r, expectedSum(r));
      CHECK(out[0].data.request_id() == p.data.request_id());
    }
  }
}

// Float addition is not associative: with these pushes, (w0 + w1) + w2 is 1 in every element but
// (w0 + w2) + w1 is 0 (1e8 + 1 rounds to 1e8 in float32). The store adds in rank order, so every
// arrival order gives the rank-order sum, bit for bit.
TEST_CASE("sum store: a round's sum is the same for every order in which pushes arrive", "[sum_store]") {
  const std::vector<std::vector<float>> pushes = {std::vector<float>(kElems, 1e8f), std::vector<float>(kElems, -1e8f),
                                                  std::vector<float>(kElems, 1.0f)};
  std::vector<int> order = {0, 1, 2};
  int orders = 0;
  do {
    INFO("arrival order " << order[0] << order[1] << order[2]);
    StoreFixture f;
    declareAll(f);
    for (int w : order) {
      auto out = f.push(w, 1, pushes[w]);
      REQUIRE(out.size() == 1);
      checkAck(out[0], w, 1);
    }
    auto out = f.pull(order[0], 1);
    REQUIRE(out.size() == 1);
    checkSumReply(out[0], order[0], 1, std::vector<float>(kElems, 1.0f));
    ++orders;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(orders == 6);
}

TEST_CASE("sum store: int32 sums are exact and wrap", "[sum_store]") {
  StoreFixture f;
  for (int w = 0; w < kWorkers; ++w) REQUIRE(f.declare(w, 9, 3, DType::kInt32, "counts").size() == 1);
  const std::vector<int32_t> values[kWorkers] = {{1, -5, INT32_MAX}, {10, -50, 1}, {100, 55, 0}};
  for (int w = 0; w < kWorkers; ++w) {
    auto out = f.send(w, StoreFixture::pushMessage(pb::CMD_PUSH, 9, 1, DType::kInt32, values[w]));
    REQUIRE(out.size() == 1);
    CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  }
  auto out = f.send(1, StoreFixture::header(pb::CMD_PULL, 9, 1, DType::kInt32, 0));
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].payload.size() == 3 * sizeof(int32_t));
  int32_t got[3];
  std::memcpy(got, out[0].payload.data(), sizeof(got));
  CHECK(got[0] == 111);
  CHECK(got[1] == 0);
  CHECK(got[2] == INT32_MIN);
  CHECK(out[0].data.reply().dtype() == static_cast<uint32_t>(DType::kInt32));
}

TEST_CASE("sum store: a pull before the round completes is parked", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  REQUIRE(f.push(0, 1, pushValues(0, 1)).size() == 1);
  CHECK(f.pull(0, 1).empty());  // parked: no reply yet
  REQUIRE(f.push(1, 1, pushValues(1, 1)).size() == 1);
  CHECK(f.pull(1, 1).empty());
  auto out = f.push(2, 1, pushValues(2, 1));
  // The last push is acknowledged, and both parked pulls are answered.
  REQUIRE(out.size() == 3);
  checkAck(out[0], 2, 1);
  checkSumReply(out[1], 0, 1, expectedSum(1));
  checkSumReply(out[2], 1, 1, expectedSum(1));
  // A parked pull is answered only once.
  out = f.pull(2, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 2, 1, expectedSum(1));
  pushRound(f, 2);  // no parked pull is left to answer
}

TEST_CASE("sum store: parked replies echo the pull's request id", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  auto p = StoreFixture::header(pb::CMD_PULL, kKey, 1, DType::kFloat32, 0);
  REQUIRE(f.send(1, p).empty());
  for (int w = 0; w < kWorkers - 1; ++w) REQUIRE(f.push(w, 1, pushValues(w, 1)).size() == 1);
  auto out = f.push(2, 1, pushValues(2, 1));
  REQUIRE(out.size() == 2);
  CHECK(out[1].data.request_id() == p.data.request_id());
  checkSumReply(out[1], 1, 1, expectedSum(1));
}

TEST_CASE("sum store: round r+1 pushes while round r is still being pulled", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  pushRound(f, 1);
  auto out = f.pull(0, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 1, expectedSum(1));
  // Worker 0 is already in round 2 while workers 1 and 2 have not pulled round 1 yet.
  out = f.push(0, 2, pushValues(0, 2));
  REQUIRE(out.size() == 1);
  checkAck(out[0], 0, 2);
  CHECK(f.pull(0, 2).empty());
  out = f.pull(1, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 1, 1, expectedSum(1));
  REQUIRE(f.push(1, 2, pushValues(1, 2)).size() == 1);
  out = f.pull(2, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 2, 1, expectedSum(1));
  out = f.push(2, 2, pushValues(2, 2));
  REQUIRE(out.size() == 2);
  checkAck(out[0], 2, 2);
  checkSumReply(out[1], 0, 2, expectedSum(2));
}

TEST_CASE("sum store: a late round completes the rounds already full behind it", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  // Workers 0 and 1 push rounds 1 and 2; worker 2 pushes round 2 before round 1.
  for (int w = 0; w < 2; ++w) {
    REQUIRE(f.push(w, 1, pushValues(w, 1)).size() == 1);
    REQUIRE(f.push(w, 2, pushValues(w, 2)).size() == 1);
  }
  REQUIRE(f.push(2, 2, pushValues(2, 2)).size() == 1);
  CHECK(f.pull(0, 2).empty());
  CHECK(f.pull(1, 1).empty());
  auto out = f.push(2, 1, pushValues(2, 1));
  REQUIRE(out.size() == 3);
  checkAck(out[0], 2, 1);
  checkSumReply(out[1], 1, 1, expectedSum(1));
  checkSumReply(out[2], 0, 2, expectedSum(2));
}

TEST_CASE("sum store: a result still being sent is never overwritten", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  pushRound(f, 1);
  auto held = f.pull(0, 1);  // like a reply still queued in the transport
  REQUIRE(held.size() == 1);
  for (uint64_t r = 2; r <= 8; ++r) {
    pushRound(f, r);
    auto out = f.pull(1, r);
    REQUIRE(out.size() == 1);
    checkSumReply(out[0], 1, r, expectedSum(r));
  }
  checkSumReply(held[0], 0, 1, expectedSum(1));
}

TEST_CASE("sum store: the last kKeptResults results stay available to pull", "[sum_store]") {
  static_assert(SumStore::kKeptResults == SumStore::kMaxRoundsAhead + 1);
  StoreFixture f;
  declareAll(f);
  // A worker may push kMaxRoundsAhead rounds past one it has not pulled: round 1 must still be there.
  pushRound(f, 1);
  pushRound(f, 2);
  pushRound(f, 3);
  auto out = f.pull(0, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 1, expectedSum(1));
  pushRound(f, 4);
  out = f.pull(0, 2);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 2, expectedSum(2));
  checkError(f.pull(0, 1), 0, "no longer kept");
}

// Worker w's push (or push-pull) of round r that says it has every reply up to round `received`.
wire::DataMessage pushSaying(pb::DataCommand cmd, int w, uint64_t r, uint64_t received) {
  auto m = StoreFixture::pushMessage(cmd, kKey, r, DType::kFloat32, pushValues(w, r));
  m.data.mutable_tensor()->set_received_through(received);
  return m;
}

TEST_CASE("sum store: a result is freed once every worker has received it, and not before", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  // Round 1's sum is worker 0's push buffer, adopted: watch it go.
  std::weak_ptr<const void> round1;
  {
    auto m = pushSaying(pb::CMD_PUSH_PULL, 0, 1, 0);
    round1 = m.payload.owner();
    CHECK(f.send(0, m).empty());  // parked until round 1 completes
  }
  CHECK(f.send(1, pushSaying(pb::CMD_PUSH_PULL, 1, 1, 0)).empty());
  CHECK(f.send(2, pushSaying(pb::CMD_PUSH, 2, 1, 0)).size() == 3);  // its ack and the two parked replies
  // Workers 0 and 1 have round 1 and say so; worker 2 pushed without pulling, so it still may.
  CHECK(f.send(0, pushSaying(pb::CMD_PUSH_PULL, 0, 2, 1)).empty());
  CHECK(f.send(1, pushSaying(pb::CMD_PUSH_PULL, 1, 2, 1)).empty());
  auto out = f.pull(2, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 2, 1, expectedSum(1));
  out.clear();
  CHECK_FALSE(round1.expired());
  // Worker 2's next request says it has round 1 too: the result goes, round 2 is answered.
  out = f.send(2, pushSaying(pb::CMD_PUSH_PULL, 2, 2, 1));
  REQUIRE(out.size() == 3);
  checkSumReply(out[0], 0, 2, expectedSum(2));
  checkSumReply(out[1], 1, 2, expectedSum(2));
  checkSumReply(out[2], 2, 2, expectedSum(2));
  CHECK(round1.expired());
  checkError(f.pull(2, 1), 2, "no longer kept");
  // A resent round-2 push-pull still gets the kept round 2.
  out = f.send(0, pushSaying(pb::CMD_PUSH_PULL, 0, 2, 1));
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 2, expectedSum(2));
}

TEST_CASE("sum store: received_through beyond the completed rounds frees nothing", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  // Every worker claims far more than exists (a bug or a hostile peer) before round 1 completes.
  for (int w = 0; w < kWorkers; ++w) f.send(w, pushSaying(pb::CMD_PUSH, w, 1, 1000));
  auto out = f.pull(0, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 1, expectedSum(1));
  // The claim counted only up to round 0 then; round 1 stays until a request says so after it completed.
  for (int w = 0; w < kWorkers; ++w) f.send(w, pushSaying(pb::CMD_PUSH, w, 2, 0));
  out = f.pull(1, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 1, 1, expectedSum(1));
}

// zps bench's server columns (CMD_STATS): pushed bytes are always counted; additions are timed only
// once stats were asked for, so a job that never asks reads no clock per sum.
TEST_CASE("sum store: additions are timed only after a stats request, per engine", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  constexpr uint64_t kBytes = kElems * sizeof(float);
  auto pushRound = [&f](uint64_t r) {
    for (int w = 0; w < kWorkers; ++w) REQUIRE(f.push(w, r, pushValues(w, r)).size() == 1);
  };
  pushRound(1);
  CHECK(f.counts().pushed_bytes == kWorkers * kBytes);
  CHECK(f.counts().summed_bytes == 0);
  CHECK(f.counts().sum_ns == 0);
  CHECK_FALSE(f.counts().timed);

  SumCounts other_engine;
  other_engine.pushed_bytes = 5;
  other_engine.summed_bytes = 7;
  other_engine.sum_ns = 11;
  const Outgoing stats = statsReply(peerOf(0), StoreFixture::header(pb::CMD_STATS, 0, 0, DType::kFloat32, 0).data,
                                    {&f.counts(), &other_engine});
  CHECK(wire::commandOf(stats.data) == pb::CMD_REPLY);
  CHECK(stats.data.stats_reply().pushed_bytes() == kWorkers * kBytes + 5);
  CHECK(stats.data.stats_reply().summed_bytes() == 7);
  CHECK(stats.data.stats_reply().sum_ns() == 11);
  CHECK(stats.data.stats_reply().cpu_ns() > 0);
  CHECK(f.counts().timed);
  CHECK(other_engine.timed);

  // Worker 0's push becomes the round's sum without an addition; the other two are added.
  pushRound(2);
  CHECK(f.counts().pushed_bytes == 2 * kWorkers * kBytes);
  CHECK(f.counts().summed_bytes == (kWorkers - 1) * kBytes);
  auto out = f.pull(0, 2);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 2, expectedSum(2));
}

}  // namespace
}  // namespace zps
