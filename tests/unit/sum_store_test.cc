// Tests for the server's summation store (ps/server/sum_store.cc) with the CPU reducer: exact sums
// per round, parked pulls, overlapping rounds, duplicate pushes, and an error reply (never a crash)
// for every bad request. Messages are built directly as wire::DataMessage values.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/reducer.h"
#include "ps/server/sum_store.h"

namespace zps {
namespace {

constexpr int kWorkers = 3;
constexpr uint64_t kKey = 7;
constexpr uint64_t kElems = 4;

PeerId peerOf(int worker) { return 100 + static_cast<PeerId>(worker); }

class StoreFixture {
 public:
  explicit StoreFixture(int workers = kWorkers, std::unique_ptr<kernels::Reducer> reducer = kernels::makeCpuReducer())
      : reducer_(std::move(reducer)), store_(workers, reducer_.get()) {}

  static wire::DataMessage header(pb::DataCommand cmd, uint64_t key, uint64_t round, DType dtype,
                                  uint64_t num_elements) {
    wire::DataMessage m;
    m.header.set_command(cmd);
    m.header.set_request_id(nextRequestId());
    m.header.set_key(key);
    m.header.set_round(round);
    m.header.set_dtype(static_cast<uint32_t>(dtype));
    m.header.set_num_elements(num_elements);
    m.header.set_mode(pb::MODE_SUM);
    m.dtype = dtype;
    return m;
  }

  std::vector<Outgoing> send(int worker, const wire::DataMessage& m) {
    std::vector<Outgoing> out;
    store_.handle(peerOf(worker), worker, m, &out);
    return out;
  }

  std::vector<Outgoing> declare(int worker, uint64_t key, uint64_t n, DType dtype = DType::kFloat32,
                                const std::string& name = "grad") {
    auto m = header(pb::CMD_DECLARE, key, 0, dtype, n);
    m.header.set_name(name);
    return send(worker, m);
  }

  template <typename T>
  static wire::DataMessage pushMessage(pb::DataCommand cmd, uint64_t key, uint64_t round, DType dtype,
                                       const std::vector<T>& values) {
    auto m = header(cmd, key, round, dtype, values.size());
    m.payload = Blob::copyOf(values.data(), values.size() * sizeof(T));
    return m;
  }

  std::vector<Outgoing> push(int worker, uint64_t round, const std::vector<float>& values,
                             pb::DataCommand cmd = pb::CMD_PUSH, uint64_t key = kKey) {
    return send(worker, pushMessage(cmd, key, round, DType::kFloat32, values));
  }

  std::vector<Outgoing> pull(int worker, uint64_t round, uint64_t key = kKey) {
    return send(worker, header(pb::CMD_PULL, key, round, DType::kFloat32, 0));
  }

  SumStore& store() { return store_; }

 private:
  static uint64_t nextRequestId() {
    static uint64_t id = 1000;
    return ++id;
  }
  std::unique_ptr<kernels::Reducer> reducer_;
  SumStore store_;
};

std::vector<float> floatsOf(const Blob& b) {
  REQUIRE(b.size() % sizeof(float) == 0);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Worker w's push in round r: element i is (w + 1) * r + i, all exact in float32.
std::vector<float> pushValues(int w, uint64_t r) {
  std::vector<float> v(kElems);
  for (size_t i = 0; i < kElems; ++i) v[i] = static_cast<float>((w + 1) * r + i);
  return v;
}

// The sum of every worker's pushValues in round r.
std::vector<float> expectedSum(uint64_t r, int workers = kWorkers) {
  std::vector<float> v(kElems, 0.0f);
  for (int w = 0; w < workers; ++w)
    for (size_t i = 0; i < kElems; ++i) v[i] += static_cast<float>((w + 1) * r + i);
  return v;
}

void checkAck(const Outgoing& o, int worker, uint64_t round) {
  CHECK(o.peer == peerOf(worker));
  CHECK(o.header.command() == pb::CMD_REPLY);
  CHECK(o.header.key() == kKey);
  CHECK(o.header.round() == round);
  CHECK(o.payload.empty());
}

void checkSumReply(const Outgoing& o, int worker, uint64_t round, const std::vector<float>& sum) {
  CHECK(o.peer == peerOf(worker));
  CHECK(o.header.command() == pb::CMD_REPLY);
  CHECK(o.header.key() == kKey);
  CHECK(o.header.round() == round);
  CHECK(o.header.num_elements() == kElems);
  CHECK(o.header.dtype() == static_cast<uint32_t>(DType::kFloat32));
  CHECK(floatsOf(o.payload) == sum);
}

void checkError(const std::vector<Outgoing>& out, int worker, const std::string& needle) {
  REQUIRE(out.size() == 1);
  CHECK(out[0].peer == peerOf(worker));
  CHECK(out[0].header.command() == pb::CMD_ERROR);
  CHECK(out[0].payload.empty());
  CHECK_THAT(out[0].header.error(), Catch::Contains(needle));
}

void declareAll(StoreFixture& f, uint64_t key = kKey, uint64_t n = kElems) {
  for (int w = 0; w < kWorkers; ++w) {
    auto out = f.declare(w, key, n);
    REQUIRE(out.size() == 1);
    CHECK(out[0].header.command() == pb::CMD_REPLY);
  }
}

void pushRound(StoreFixture& f, uint64_t round) {
  for (int w = 0; w < kWorkers; ++w) {
    auto out = f.push(w, round, pushValues(w, round));
    REQUIRE(out.size() == 1);
    checkAck(out[0], w, round);
  }
}

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
    CHECK(out[0].header.request_id() == m.header.request_id());
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
      CHECK(out[0].header.request_id() == p.header.request_id());
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
    CHECK(out[0].header.command() == pb::CMD_REPLY);
  }
  auto out = f.send(1, StoreFixture::header(pb::CMD_PULL, 9, 1, DType::kInt32, 0));
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].payload.size() == 3 * sizeof(int32_t));
  int32_t got[3];
  std::memcpy(got, out[0].payload.data(), sizeof(got));
  CHECK(got[0] == 111);
  CHECK(got[1] == 0);
  CHECK(got[2] == INT32_MIN);
  CHECK(out[0].header.dtype() == static_cast<uint32_t>(DType::kInt32));
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
  CHECK(out[1].header.request_id() == p.header.request_id());
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
  m.header.set_received_through(received);
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
  CHECK_THAT(out[0].header.error(), Catch::Contains("finished long ago"));
  CHECK(out[0].header.round() == 1);
}

TEST_CASE("sum store: a push too far ahead is an error", "[sum_store]") {
  StoreFixture f;
  declareAll(f);
  auto m =
      StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1 + SumStore::kMaxRoundsAhead, DType::kFloat32, pushValues(0, 3));
  auto out = f.send(0, m);
  checkError(out, 0, "too far ahead");
  CHECK(out[0].header.request_id() == m.header.request_id());
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
  CHECK(out[0].header.command() == pb::CMD_REPLY);
  // The same declaration from another worker is fine.
  out = f.declare(1, kKey, kElems, DType::kFloat32, "grad");
  REQUIRE(out.size() == 1);
  CHECK(out[0].header.command() == pb::CMD_REPLY);
  CHECK(f.store().numKeys() == 1);

  out = f.declare(2, kKey, 8, DType::kFloat32, "grad");
  checkError(out, 2, "'grad' (4 x float32)");
  CHECK_THAT(out[0].header.error(), Catch::Contains("'grad' (8 x float32)"));
  out = f.declare(2, kKey, kElems, DType::kFloat16, "grad");
  checkError(out, 2, "'grad' (4 x float16)");
  out = f.declare(2, kKey, kElems, DType::kFloat32, "bias");
  checkError(out, 2, "'bias' (4 x float32)");
  CHECK_THAT(out[0].header.error(), Catch::Contains("was declared as 'grad'"));

  checkError(f.declare(0, 8, 0), 0, "declared with 0 elements");
  auto param = StoreFixture::header(pb::CMD_DECLARE, 10, 0, DType::kFloat32, 4);
  param.header.set_mode(pb::MODE_PARAM);
  checkError(f.send(0, param), 0, "MODE_PARAM is not supported");
  CHECK(f.store().numKeys() == 1);
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
    CHECK(out[0].header.request_id() == m0.header.request_id());
    CHECK(out[1].header.request_id() == m1.header.request_id());
    CHECK(out[2].header.request_id() == m2.header.request_id());
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
  REQUIRE(out[0].header.command() == pb::CMD_ERROR);
  CHECK(out[0].header.error().size() <= 4000);
  auto decoded = wire::decode(wire::encodeData(out[0].header), wire::Limits());
  REQUIRE(decoded.ok());
  CHECK_THAT(std::get<wire::DataMessage>(*decoded).header.error(), Catch::StartsWith("key 7 was declared as '"));
}

TEST_CASE("sum store: errorReply copies the request's identity", "[sum_store]") {
  pb::DataHeader h;
  h.set_request_id(5);
  h.set_key(6);
  h.set_round(7);
  h.set_dtype(3);
  Outgoing o = errorReply(42, h, std::string(5000, 'e'));
  CHECK(o.peer == 42);
  CHECK(o.header.command() == pb::CMD_ERROR);
  CHECK(o.header.request_id() == 5);
  CHECK(o.header.key() == 6);
  CHECK(o.header.round() == 7);
  CHECK(o.header.dtype() == 3);
  CHECK(o.header.error().size() == 4000);  // fits the codec's string limit
}

}  // namespace
}  // namespace zps

namespace zps {
namespace {

TEST_CASE("sum store: keys past the memory budget are refused, and a store gives its charge back", "[sum_store]") {
  auto reducer = kernels::makeCpuReducer();
  // A synchronous key of 1000 floats is charged (2 rounds ahead x 2 workers + 3 results) x 4000 bytes
  // plus 256.
  MemoryBudget budget(40'000);
  {
    SumStore store(2, reducer.get(), &budget);
    auto declare = [&](uint64_t key, uint64_t n) {
      auto m = StoreFixture::header(pb::CMD_DECLARE, key, 0, DType::kFloat32, n);
      m.header.set_name("t");
      std::vector<Outgoing> out;
      store.handle(peerOf(0), 0, m, &out);
      REQUIRE(out.size() == 1);
      return out[0].header;
    };
    CHECK(declare(1, 1000).command() == pb::CMD_REPLY);
    CHECK(budget.used() == 28'256);
    CHECK(declare(1, 1000).command() == pb::CMD_REPLY);  // a repeat costs nothing
    pb::DataHeader refused = declare(2, 1000);
    CHECK(refused.command() == pb::CMD_ERROR);
    CHECK_THAT(refused.error(), Catch::Contains("ZPS_SERVER_MAX_BYTES=40000"));
    CHECK(budget.used() == 28'256);
    CHECK(declare(3, 100).command() == pb::CMD_REPLY);
  }
  CHECK(budget.used() == 0);
}

// The CPU twin of the CUDA engine's accumulation: the round's value lives elsewhere (here a map,
// there device memory) from start() to collect(), and dst holds garbage meanwhile. So the store
// passes only if it collects before it replies, and never reads dst in between.
class DeferredReducer final : public kernels::Reducer {
 public:
  explicit DeferredReducer(bool fail_collect = false) : fail_collect_(fail_collect) {}
  const char* name() const override { return "deferred"; }
  bool holdsRounds() const override { return true; }
  Status sum(void* dst, const void* src, size_t count, DType dtype) override {
    kernels::cpuSum(dst, src, count, dtype);
    return Status::OK();
  }
  Status start(void* dst, const void* src, size_t count, DType dtype) override {
    const size_t bytes = count * dtypeSize(dtype);
    auto& held = held_[dst];
    held.assign(static_cast<const uint8_t*>(src), static_cast<const uint8_t*>(src) + bytes);
    std::memset(dst, 0xA5, bytes);
    return Status::OK();
  }
  Status add(void* dst, const void* src, size_t count, DType dtype) override {
    auto it = held_.find(dst);
    if (it == held_.end()) return InternalError("add before start");
    kernels::cpuSum(it->second.data(), src, count, dtype);
    return Status::OK();
  }
  Status collect(void* dst) override {
    auto it = held_.find(dst);
    if (it == held_.end()) return InternalError("collect before start");
    if (fail_collect_) {
      held_.erase(it);
      return InternalError("device copy failed (test)");
    }
    std::memcpy(dst, it->second.data(), it->second.size());
    held_.erase(it);
    return Status::OK();
  }
  void discard(void* dst) override { held_.erase(dst); }
  size_t inFlight() const { return held_.size(); }

 private:
  const bool fail_collect_;
  std::map<void*, std::vector<uint8_t>> held_;
};

TEST_CASE("sum store: an engine that holds sums until collect() (the CUDA engine's way) gives exact sums",
          "[sum_store]") {
  auto owned = std::make_unique<DeferredReducer>();
  DeferredReducer* reducer = owned.get();
  StoreFixture f(kWorkers, std::move(owned));
  declareAll(f);
  declareAll(f, kKey + 1);
  for (uint64_t r = 1; r <= 5; ++r) {
    INFO("round " << r);
    // Worker 0 pulls first (parked), the two keys' rounds interleave, the last push completes them.
    auto parked = f.pull(0, r);
    CHECK(parked.empty());
    for (int w = 0; w < kWorkers; ++w) {
      REQUIRE(f.push(w, r, pushValues(w, r), pb::CMD_PUSH, kKey + 1).size() == 1);
      auto out = f.push(w, r, pushValues(w, r));
      if (w + 1 < kWorkers) {
        REQUIRE(out.size() == 1);
        continue;
      }
      REQUIRE(out.size() == 2);  // the ack and the parked pull's answer
      checkAck(out[0], w, r);
      checkSumReply(out[1], 0, r, expectedSum(r));
    }
    for (int w = 1; w < kWorkers; ++w) {
      auto out = f.pull(w, r);
      REQUIRE(out.size() == 1);
      checkSumReply(out[0], w, r, expectedSum(r));
    }
    auto other = f.pull(2, r, kKey + 1);
    REQUIRE(other.size() == 1);
    CHECK(floatsOf(other[0].payload) == expectedSum(r));
    CHECK(reducer->inFlight() == 0);
  }
}

TEST_CASE("sum store: a compressed push joining a sum the engine holds brings it home first", "[sum_store]") {
  auto owned = std::make_unique<DeferredReducer>();
  DeferredReducer* reducer = owned.get();
  StoreFixture f(kWorkers, std::move(owned));
  declareAll(f);
  // Worker 0 dense (the engine holds the sum), worker 1 fp16 (decoded on the CPU), worker 2 dense.
  REQUIRE(f.push(0, 1, pushValues(0, 1)).size() == 1);
  CHECK(reducer->inFlight() == 1);
  auto fp16 = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kFloat32, pushValues(1, 1));
  std::vector<uint16_t> halves;
  for (float v : pushValues(1, 1)) halves.push_back(kernels::floatToHalf(v));
  fp16.header.set_encoding(pb::ENCODING_FP16);
  fp16.payload = Blob::copyOf(halves.data(), halves.size() * sizeof(uint16_t));
  REQUIRE(f.send(1, fp16).size() == 1);
  CHECK(reducer->inFlight() == 0);
  REQUIRE(f.push(2, 1, pushValues(2, 1)).size() == 1);
  auto out = f.pull(0, 1);
  REQUIRE(out.size() == 1);
  checkSumReply(out[0], 0, 1, expectedSum(1));
}

TEST_CASE("sum store: a store reset mid-round releases what the engine holds for it", "[sum_store]") {
  DeferredReducer reducer;
  {
    SumStore store(kWorkers, &reducer);
    std::vector<Outgoing> out;
    auto declare = StoreFixture::header(pb::CMD_DECLARE, kKey, 0, DType::kFloat32, kElems);
    declare.header.set_name("grad");
    store.handle(peerOf(0), 0, declare, &out);
    store.handle(peerOf(0), 0, StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kFloat32, pushValues(0, 1)),
                 &out);
    CHECK(reducer.inFlight() == 1);
  }
  CHECK(reducer.inFlight() == 0);
}

TEST_CASE("sum store: an engine failure loses that round only, and its pulls are told why", "[sum_store]") {
  StoreFixture f(kWorkers, std::make_unique<DeferredReducer>(/*fail_collect=*/true));
  declareAll(f);
  CHECK(f.pull(1, 1).empty());
  for (int w = 0; w + 1 < kWorkers; ++w) REQUIRE(f.push(w, 1, pushValues(w, 1)).size() == 1);
  auto out = f.push(kWorkers - 1, 1, pushValues(kWorkers - 1, 1));
  REQUIRE(out.size() == 2);
  CHECK(out[1].peer == peerOf(1));
  CHECK(out[1].header.command() == pb::CMD_ERROR);
  CHECK_THAT(out[1].header.error(),
             Catch::Contains("deferred engine failed to produce round 1") && Catch::Contains("device copy failed"));
  checkError(f.pull(0, 1), 0, "no longer kept");
}

}  // namespace
}  // namespace zps
