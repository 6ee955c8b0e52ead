// Tests for the summation store's handling of each request (server/sum_store.cc): duplicate and
// resent pushes counted once, declarations, PUSH_PULL, the memory budget, and an error reply (never a
// crash) for every bad request.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/sum_store_fixture.h"

namespace zps {
namespace {

using namespace sum_store_testing;

TEST_CASE("sum store: a duplicate push is acknowledged but not summed twice", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  REQUIRE(f.push(0, 1, pushValues(0, 1)).size() == 1);
  // Worker 0 sends round 1 again (a retry), with different bytes; it must count once.
  auto out = f.push(0, 1, {1000, 1000, 1000, 1000});
  REQUIRE(out.size() == 1);
  checkAck(out[0], 0, 1);
  out = f.push(1, 1, pushValues(1, 1));
  REQUIRE(out.size() == 1);
  // Three pushes arrived but only two workers pushed: the round is not complete.
  CHECK(f.pull(1, 1).empty());
  out = f.push(2, 1, pushValues(2, 1));
  REQUIRE(out.size() == 2);
  checkSumReply(out[1], 1, 1, expectedSum(1));
}

TEST_CASE("sum store: a resent push after its round completed is acknowledged, not summed", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  pushRound(f, 1);
  auto out = f.push(1, 1, {1000, 1000, 1000, 1000});
  REQUIRE(out.size() == 1);
  checkAck(out[0], 1, 1);
  // A resent PUSH_PULL gets the kept result.
  out = f.push(1, 1, pushValues(1, 1), pb::CMD_PUSH_PULL);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 1, 1, expectedSum(1));
  // The completed result is unchanged.
  out = f.pull(1, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 1, 1, expectedSum(1));
}

TEST_CASE("sum store: a push for a round finished long ago is an error", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  for (uint64_t r = 1; r <= SumStore::kKeptResults + 1; ++r) pushRound(f, r);
  auto out = f.push(1, 1, pushValues(1, 1));
  checkError(out, 1, "key 7 round 1 of 'grad'");
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("finished long ago"));
  CHECK(wire::roundOf(out[0].data) == 1);
}

TEST_CASE("sum store: a push too far ahead is an error", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  auto m =
      StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1 + SumStore::kMaxRoundsAhead, DType::kFloat32, pushValues(0, 3));
  auto out = f.send(0, m);
  checkError(out, 0, "too far ahead");
  CHECK(out[0].data.request_id() == m.data.request_id());
  CHECK(f.push(0, SumStore::kMaxRoundsAhead, pushValues(0, 2)).size() == 1);
  checkError(f.push(0, 0, pushValues(0, 0)), 0, "rounds start at 1");
  checkError(f.pull(0, 1 + SumStore::kMaxRoundsAhead), 0, "pull is too far ahead");
  checkError(f.pull(0, 0), 0, "rounds start at 1");
}

TEST_CASE("sum store: a push of the wrong dtype or size is an error reply", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  auto wrong_dtype = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kInt32, std::vector<int32_t>{1, 2, 3, 4});
  auto out = f.send(0, wrong_dtype);
  checkError(out, 0, "push of 4 x int32 does not match the declared 4 x float32");
  out = f.push(0, 1, {1, 2, 3});
  checkError(out, 0, "push of 3 x float32 does not match the declared 4 x float32");
  out = f.push(0, 1, {1, 2, 3, 4, 5, 6, 7, 8});
  checkError(out, 0, "8 x float32");
  auto pp = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, 1, DType::kFloat64, std::vector<double>{1, 2, 3, 4});
  checkError(f.send(2, pp), 2, "4 x float64");
  // The bad pushes did not count: the round still needs one push from every worker.
  REQUIRE(f.push(0, 1, pushValues(0, 1)).size() == 1);
  REQUIRE(f.push(1, 1, pushValues(1, 1)).size() == 1);
  CHECK(f.pull(0, 1).empty());
  out = f.push(2, 1, pushValues(2, 1));
  REQUIRE(out.size() == 2);
  checkSumReply(out[1], 0, 1, expectedSum(1));
}

TEST_CASE("sum store: requests for an undeclared key are errors", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  checkError(f.push(0, 1, pushValues(0, 1), pb::CMD_PUSH, 99), 0, "key 99 was never declared");
  checkError(f.push(0, 1, pushValues(0, 1), pb::CMD_PUSH_PULL, 99), 0, "key 99 was never declared");
  checkError(f.pull(1, 1, 99), 1, "key 99 was never declared");
  CHECK(f.store().numKeys() == 1);
}

TEST_CASE("sum store: declarations", "[sum_store]") {
  StoreFixture f;
  auto out = f.declare(0, kKey, kElems, DType::kFloat32, "grad");
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  // The same declaration from another worker is fine.
  out = f.declare(1, kKey, kElems, DType::kFloat32, "grad");
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  CHECK(f.store().numKeys() == 1);

  out = f.declare(2, kKey, 8, DType::kFloat32, "grad");
  checkError(out, 2, "'grad' (4 x float32)");
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("'grad' (8 x float32)"));
  out = f.declare(2, kKey, kElems, DType::kFloat16, "grad");
  checkError(out, 2, "'grad' (4 x float16)");
  out = f.declare(2, kKey, kElems, DType::kFloat32, "bias");
  checkError(out, 2, "'bias' (4 x float32)");
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("was declared as 'grad'"));

  checkError(f.declare(0, 8, 0), 0, "declared with 0 elements");
  auto param = StoreFixture::header(pb::CMD_DECLARE, 10, 0, DType::kFloat32, 4);
  param.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  checkError(f.send(0, param), 0, "MODE_PARAM is not supported");
  CHECK(f.store().numKeys() == 1);
}

TEST_CASE("sum store: a process set's key sums its contributors' pushes alone, in rank order", "[sum_store]") {
  StoreFixture f;  // 3 workers; ranks 0 and 2 form the set
  auto declare = [&](int worker, uint32_t contributors) {
    auto m = StoreFixture::header(pb::CMD_DECLARE, kKey, 0, DType::kFloat32, kElems);
    m.data.mutable_declare()->set_name("set");
    m.data.mutable_declare()->set_contributors(contributors);
    return f.send(worker, m);
  };
  REQUIRE(declare(2, 2).size() == 1);
  REQUIRE(declare(0, 2).size() == 1);
  checkError(declare(1, 0), 1, "this worker declares 'set'");  // the same key for every worker: refused
  auto out = declare(1, 4);
  checkError(out, 1, "declared with 4 contributors");
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("0 (all) to 3"));
  for (uint64_t r = 1; r <= 2; ++r) {
    // Rank 2 first: nothing is summed until rank 0 comes, and the sum is 0's plus 2's.
    REQUIRE(f.push(2, r, pushValues(2, r), pb::CMD_PUSH_PULL).empty());
    out = f.push(0, r, pushValues(0, r), pb::CMD_PUSH_PULL);
    REQUIRE(out.size() == 2);
    std::vector<float> want = pushValues(0, r);
    for (size_t i = 0; i < kElems; ++i) want[i] += pushValues(2, r)[i];
    checkSumReply(out[0], 2, r, want);  // the parked pull first
    checkSumReply(out[1], 0, r, want);
  }
  // Round 4 has its two pushes while round 3 waits for rank 0: a third push to it is refused.
  REQUIRE(f.push(2, 3, pushValues(2, 3)).size() == 1);
  REQUIRE(f.push(0, 4, pushValues(0, 4)).size() == 1);
  REQUIRE(f.push(2, 4, pushValues(2, 4)).size() == 1);
  checkError(f.push(1, 4, pushValues(1, 4)), 1, "round 4 has all its 2 contributors already");
}

TEST_CASE("sum store: a process set's key with local ranks counts each process apart", "[sum_store]") {
  StoreFixture f(2);  // 2 worker nodes x 2 local ranks: processes 0, 1 (node 0) and 2, 3 (node 1)
  constexpr uint32_t kLocal = 2;
  // Process p is node p / 2's local rank p % 2; it pushes pushValues(p, round).
  auto sendAs = [&](int process, const wire::DataMessage& m) {
    std::vector<Outgoing> out;
    f.store().handle(peerOf(process), process / 2, m, &out, process % 2);
    return out;
  };
  auto declare = [&](int process, uint32_t contributors, uint32_t local_size) {
    auto m = StoreFixture::header(pb::CMD_DECLARE, kKey, 0, DType::kFloat32, kElems);
    m.data.mutable_declare()->set_name("set");
    m.data.mutable_declare()->set_contributors(contributors);
    m.data.mutable_declare()->set_local_size(local_size);
    return sendAs(process, m);
  };
  checkError(declare(0, 5, kLocal), 0, "0 (all) to 4");
  checkError(declare(0, 0, kLocal), 0, "a process set's key (with contributors) only");
  // The set of processes 0, 1 and 3: two of node 0's local ranks, one of node 1's.
  for (int p : {0, 1, 3}) REQUIRE(wire::commandOf(declare(p, 3, kLocal)[0].data) == pb::CMD_REPLY);
  checkError(declare(2, 2, 1), 2, "this worker declares 'set'");  // another local size: refused
  auto push = [&](int process, uint64_t r) {
    return sendAs(process,
                  StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, r, DType::kFloat32, pushValues(process, r)));
  };
  for (uint64_t r = 1; r <= 2; ++r) {
    INFO("round " << r);
    // Node 0's two local ranks are two contributors, not one worker pushing twice.
    REQUIRE(push(3, r).empty());
    REQUIRE(push(1, r).empty());
    auto out = push(0, r);
    REQUIRE(out.size() == 3);
    std::vector<float> want(kElems, 0.0f);
    for (int p : {0, 1, 3})
      for (size_t i = 0; i < kElems; ++i) want[i] += pushValues(p, r)[i];
    checkSumReply(out[0], 3, r, want);  // parked pulls first, in the order they came
    checkSumReply(out[1], 1, r, want);
    checkSumReply(out[2], 0, r, want);
  }
  // A repeated push of one local rank is acknowledged, not counted: the round waits for the others.
  std::vector<Outgoing> out =
      sendAs(1, StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 3, DType::kFloat32, pushValues(1, 3)));
  REQUIRE(out.size() == 1);
  REQUIRE(sendAs(1, StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 3, DType::kFloat32, pushValues(9, 3))).size() == 1);
  REQUIRE(sendAs(0, StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 3, DType::kFloat32, pushValues(0, 3))).size() == 1);
  CHECK(sendAs(0, StoreFixture::header(pb::CMD_PULL, kKey, 3, DType::kFloat32, 0)).empty());
  out = push(3, 3);
  REQUIRE(out.size() == 2);  // the parked pull and this push-pull
  std::vector<float> want(kElems, 0.0f);
  for (int p : {0, 1, 3})
    for (size_t i = 0; i < kElems; ++i) want[i] += pushValues(p, 3)[i];
  checkSumReply(out[0], 0, 3, want);
  checkSumReply(out[1], 3, 3, want);
  // A local rank outside the key's local size is refused, naming it.
  out.clear();
  f.store().handle(peerOf(9), 1, StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 4, DType::kFloat32, pushValues(0, 4)),
                   &out, 2);
  checkError(out, 9, "local rank 2 is outside the key's local size 2");
}

TEST_CASE("sum store: PUSH_PULL replies carry the round's sum", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  for (uint64_t r = 1; r <= 3; ++r) {
    INFO("round " << r);
    auto m0 = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, r, DType::kFloat32, pushValues(0, r));
    auto m1 = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, r, DType::kFloat32, pushValues(1, r));
    auto m2 = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, r, DType::kFloat32, pushValues(2, r));
    CHECK(f.send(0, m0).empty());  // no separate push ack; the reply waits for the sum
    CHECK(f.send(1, m1).empty());
    auto out = f.send(2, m2);
    REQUIRE(out.size() == 3);
    checkSumReply(out[0], 0, r, expectedSum(r));
    checkSumReply(out[1], 1, r, expectedSum(r));
    checkSumReply(out[2], 2, r, expectedSum(r));
    CHECK(out[0].data.request_id() == m0.data.request_id());
    CHECK(out[1].data.request_id() == m1.data.request_id());
    CHECK(out[2].data.request_id() == m2.data.request_id());
  }
}

TEST_CASE("sum store: a single worker's PUSH_PULL is answered at once", "[sum_store]") {
  StoreFixture f(1);
  REQUIRE(f.declare(0, kKey, kElems).size() == 1);
  auto out = f.push(0, 1, pushValues(0, 1), pb::CMD_PUSH_PULL);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 1, pushValues(0, 1));
}

TEST_CASE("sum store: parked pulls are bounded", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  const size_t limit = kWorkers * (SumStore::kMaxRoundsAhead + 1) * 2;
  for (size_t i = 0; i < limit; ++i) REQUIRE(f.pull(static_cast<int>(i % kWorkers), 1).empty());
  checkError(f.pull(0, 1), 0, "too many pulls waiting");
}

TEST_CASE("sum store: commands it does not serve are errors", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  for (pb::DataCommand cmd : {pb::CMD_HELLO, pb::CMD_REPLY, pb::CMD_ERROR}) {
    INFO(pb::DataCommand_Name(cmd));
    auto out = f.send(0, StoreFixture::header(cmd, kKey, 1, DType::kFloat32, 0));
    checkError(out, 0, "is not served here");
  }
}

TEST_CASE("sum store: a long error with non-ASCII names still reaches the worker", "[sum_store]") {
  // Tensor names are UTF-8 (the codec's proto3 strings insist on it). A re-declaration error quotes
  // the name twice and is cut to 4000 bytes; the cut must not split a character, or the worker
  // cannot decode the ERROR reply and never sees why its declaration failed.
  StoreFixture f;
  std::string name;
  for (int i = 0; i < 2000; ++i) name += "\xc3\xa9";  // U+00E9, 2 bytes: 4000 bytes in all
  REQUIRE(f.declare(0, kKey, kElems, DType::kFloat32, name).size() == 1);
  auto out = f.declare(1, kKey, 2 * kElems, DType::kFloat32, name);
  REQUIRE(out.size() == 1);
  REQUIRE(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK(out[0].data.error().text().size() <= 4000);
  auto decoded = wire::decode(wire::encodeData(out[0].data), wire::Limits());
  REQUIRE(decoded.ok());
  CHECK_THAT(std::get<wire::DataMessage>(*decoded).data.error().text(), Catch::StartsWith("key 7 was declared as '"));
}

TEST_CASE("sum store: errorReply copies the request's identity", "[sum_store]") {
  pb::Data h;
  h.set_request_id(5);
  h.mutable_tensor()->set_key(6);
  h.mutable_tensor()->set_round(7);
  h.mutable_tensor()->set_dtype(3);
  Outgoing o = errorReply(42, h, std::string(5000, 'e'));
  CHECK(o.peer == 42);
  CHECK(wire::commandOf(o.data) == pb::CMD_ERROR);
  CHECK(o.data.request_id() == 5);
  CHECK(wire::keyOf(o.data) == 6);
  CHECK(wire::roundOf(o.data) == 7);
  CHECK(o.data.error().text().size() == 4000);  // fits the codec's string limit
  // An Error carries no dtype; a Reply to the same request echoes it.
  Outgoing r = replyTo(42, h);
  CHECK(r.data.request_id() == 5);
  CHECK(wire::keyOf(r.data) == 6);
  CHECK(wire::roundOf(r.data) == 7);
  CHECK(r.data.reply().dtype() == 3);
}

TEST_CASE("sum store: keys past the memory budget are refused, and a store gives its charge back", "[sum_store]") {
  auto reducer = kernels::makeCpuReducer();
  // A synchronous key of 1000 floats is charged (2 rounds ahead x 2 workers + 3 results) x 4000 bytes
  // plus 256.
  MemoryBudget budget(40'000);
  {
    SumStore store(2, reducer.get(), &budget);
    auto declare = [&](uint64_t key, uint64_t n) {
      auto m = StoreFixture::header(pb::CMD_DECLARE, key, 0, DType::kFloat32, n);
      m.data.mutable_declare()->set_name("t");
      std::vector<Outgoing> out;
      store.handle(peerOf(0), 0, m, &out);
      REQUIRE(out.size() == 1);
      return out[0].data;
    };
    CHECK(wire::commandOf(declare(1, 1000)) == pb::CMD_REPLY);
    CHECK(budget.used() == 28'256);
    CHECK(wire::commandOf(declare(1, 1000)) == pb::CMD_REPLY);  // a repeat costs nothing
    pb::Data refused = declare(2, 1000);
    CHECK(wire::commandOf(refused) == pb::CMD_ERROR);
    CHECK_THAT(refused.error().text(), Catch::Contains("ZPS_SERVER_MAX_BYTES=40000"));
    CHECK(budget.used() == 28'256);
    CHECK(wire::commandOf(declare(3, 100)) == pb::CMD_REPLY);
  }
  CHECK(budget.used() == 0);
}

}  // namespace
}  // namespace zps
