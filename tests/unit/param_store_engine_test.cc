// Server param mode through an engine (ParamStore's kernels::Reducer::applyRows hook): a round is
// applied as one batch of rows, and the rows come out identical whether the CPU applies them
// directly, through the CPU reducer, or after an engine (the CUDA one, on a GPU) fails and leaves
// them to the CPU. The CUDA engine's own batch is compared with the CPU in tests/cuda.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/reducer.h"
#include "server/param_store.h"

namespace zps {
namespace {

constexpr uint32_t kDim = 5;
constexpr uint64_t kTable = 77;
constexpr int kWorkers = 2;

// An engine that refuses every batch, as a failing GPU would, without touching the rows.
class FailingEngine final : public kernels::Reducer {
 public:
  const char* name() const override { return "failing"; }
  Status sum(void*, const void*, size_t, DType) override { return InternalError("no"); }
  Status applyRows(const kernels::OptimizerConfig&, uint32_t, size_t rows, const uint32_t*, const uint64_t*,
                   const float*, float*, float*) override {
    batches.push_back(rows);
    return InternalError("device lost (test)");
  }
  std::vector<size_t> batches;
};

// A table request of `command` (DECLARE, PUSH_ROWS, PULL_ROWS or CHECKPOINT at step `round`) as the
// codec hands it over.
wire::DataMessage message(pb::DataCommand command, uint64_t round, const std::vector<uint64_t>& keys) {
  wire::DataMessage m;
  static uint64_t request = 1;
  m.data.set_request_id(++request);
  if (command == pb::CMD_DECLARE) {
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kTable);
    d->set_row_dim(kDim);
    d->set_num_elements(keys.size());
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  } else if (command == pb::CMD_CHECKPOINT) {
    m.data.mutable_checkpoint()->set_key(kTable);
    m.data.mutable_checkpoint()->set_step(round);
  } else {
    pb::Rows* r = m.data.mutable_rows();
    r->set_push(command == pb::CMD_PUSH_ROWS);
    r->set_key(kTable);
    r->set_round(round);
    r->set_row_dim(kDim);
    r->set_count(keys.size());
  }
  m.dtype = DType::kFloat32;
  m.keys = Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t));
  return m;
}

// Three rounds of Adam (per-row steps differ: rows join in different rounds) from two workers, then
// every row pulled.
std::vector<float> train(kernels::Reducer* engine) {
  ParamStore store(kWorkers, ShardPlace{}, /*budget=*/nullptr, engine);
  std::vector<Outgoing> out;
  auto declare = message(pb::CMD_DECLARE, 0, {});
  declare.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  declare.data.mutable_declare()->set_name("emb");
  auto* o = declare.data.mutable_declare()->mutable_optimizer();
  o->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kAdam));
  o->set_lr(0.1f);
  o->set_beta1(0.9f);
  o->set_beta2(0.999f);
  o->set_eps(1e-8f);
  o->set_init_scale(0.5f);
  o->set_init_seed(3);
  for (int w = 0; w < kWorkers; ++w) store.handle(w, w, 0, declare, &out);
  for (uint64_t round = 1; round <= 3; ++round) {
    for (int w = 0; w < kWorkers; ++w) {
      std::vector<uint64_t> keys = {10 + round, 20, 30 + static_cast<uint64_t>(w)};
      std::vector<float> grads(keys.size() * kDim);
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i + round * 7 + w);
      auto push = message(pb::CMD_PUSH_ROWS, round, keys);
      push.payload = Blob::copyOf(grads.data(), grads.size() * sizeof(float));
      store.handle(w, w, 0, push, &out);
    }
  }
  out.clear();
  store.handle(0, 0, 0, message(pb::CMD_PULL_ROWS, 4, {11, 12, 13, 20, 30, 31}), &out);
  REQUIRE(out.size() == 1);
  REQUIRE(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  std::vector<float> rows(out[0].payload.size() / sizeof(float));
  std::memcpy(rows.data(), out[0].payload.data(), out[0].payload.size());
  return rows;
}

TEST_CASE("param engine: rows are identical with no engine, the CPU engine, or a failing engine") {
  const std::vector<float> plain = train(nullptr);
  REQUIRE(plain.size() == 6 * kDim);
  // The rounds really updated the rows: row 20 (4th) is no longer its initial value.
  std::vector<float> initial(kDim);
  kernels::initEmbeddingRow(20, 3, 0.5f, initial.data(), kDim);
  CHECK(std::vector<float>(plain.begin() + 3 * kDim, plain.begin() + 4 * kDim) != initial);
  auto cpu = kernels::makeCpuReducer();
  CHECK(train(cpu.get()) == plain);
  FailingEngine failing;
  CHECK(train(&failing) == plain);
  // One batch per round, holding that round's distinct rows: {1r, 20, 30, 31}.
  CHECK(failing.batches == std::vector<size_t>{4, 4, 4});
}

// Several local ranks per worker node: each (worker, local rank) is a table client of its own. A round
// of a table declared with local size 2 waits for all 2 x 2 pushes, counts a resend once, sums them in
// pusher order whatever their arrival order, and the server refuses a local rank outside the declared
// size and a worker that declares another size.
TEST_CASE("param store: with local size 2 a sync round waits for every (worker, local rank) and counts each once") {
  constexpr uint32_t kLocal = 2;
  ParamStore store(kWorkers, ShardPlace{});
  std::vector<Outgoing> out;
  auto declare = message(pb::CMD_DECLARE, 0, {});
  declare.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  declare.data.mutable_declare()->set_name("emb");
  declare.data.mutable_declare()->set_local_size(kLocal);
  declare.data.mutable_declare()->mutable_optimizer()->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kSgd));
  declare.data.mutable_declare()->mutable_optimizer()->set_lr(
      1.0f);  // init_scale 0: rows start at 0, end at -(sum of grads)
  auto peerOf = [](int worker, uint32_t local_rank) { return static_cast<PeerId>(worker * kLocal + local_rank + 1); };
  auto lastCommand = [&] { return wire::commandOf(out.back().data); };
  for (int w = 0; w < kWorkers; ++w) {
    for (uint32_t l = 0; l < kLocal; ++l) {
      store.handle(peerOf(w, l), w, l, declare, &out);
      REQUIRE(lastCommand() == pb::CMD_REPLY);
    }
  }
  store.handle(9, 1, kLocal, declare, &out);
  CHECK(lastCommand() == pb::CMD_ERROR);
  CHECK(out.back().data.error().text().find("outside the DECLARE's local size 2") != std::string::npos);
  auto single = declare;
  single.data.mutable_declare()->set_local_size(1);
  store.handle(peerOf(0, 0), 0, 0, single, &out);
  CHECK(lastCommand() == pb::CMD_ERROR);
  CHECK(out.back().data.error().text().find("the same ZPS_LOCAL_SIZE") != std::string::npos);

  auto pushOf = [&](int worker, uint32_t local_rank, float grad) {
    auto push = message(pb::CMD_PUSH_ROWS, 1, {20});
    std::vector<float> grads(kDim, grad);
    push.payload = Blob::copyOf(grads.data(), grads.size() * sizeof(float));
    store.handle(peerOf(worker, local_rank), worker, local_rank, push, &out);
  };
  out.clear();
  // In pusher order the float sum is ((1e8 + 1) - 1e8) + 1 = 1 (1e8 + 1 rounds to 1e8); in arrival
  // order it would be ((-1e8 + 1e8) + 1) + 1 = 2.
  pushOf(1, 0, -1e8f);
  pushOf(0, 0, 1e8f);
  pushOf(0, 1, 1);
  pushOf(0, 1, 1);  // a resend: acknowledged, not counted again
  pushOf(1, kLocal, 16);
  CHECK(lastCommand() == pb::CMD_ERROR);
  CHECK(out.back().data.error().text().find("outside the table's local size 2") != std::string::npos);
  out.clear();
  store.handle(peerOf(0, 0), 0, 0, message(pb::CMD_PULL_ROWS, 2, {20}), &out);
  CHECK(out.empty());  // parked: round 1 still lacks worker 1's local rank 1
  pushOf(1, 1, 1);
  REQUIRE(out.size() == 2);  // the push's ack, then the parked pull
  REQUIRE(wire::commandOf(out[1].data) == pb::CMD_REPLY);
  std::vector<float> row(kDim);
  REQUIRE(out[1].payload.size() == kDim * sizeof(float));
  std::memcpy(row.data(), out[1].payload.data(), out[1].payload.size());
  CHECK(row == std::vector<float>(kDim, -1.0f));
}

// A prefetch (Worker::pullRowsAhead): worker 0 asks for round 3's rows before its push of round 2. The
// server holds the pull until round 2 is applied by both workers, then answers with exactly the rows a
// pull of round 3 sent afterwards gets. A pull past kMaxPullRoundsAhead is refused, naming the round.
TEST_CASE("param store: a prefetch is held until its round is applied and gets the rows of a later pull") {
  ParamStore store(kWorkers, ShardPlace{});
  std::vector<Outgoing> out;
  auto declare = message(pb::CMD_DECLARE, 0, {});
  declare.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  declare.data.mutable_declare()->set_name("emb");
  declare.data.mutable_declare()->mutable_optimizer()->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kSgd));
  declare.data.mutable_declare()->mutable_optimizer()->set_lr(
      1.0f);  // init_scale 0: rows start at 0, end at -(sum of grads)
  for (int w = 0; w < kWorkers; ++w) store.handle(w + 1, w, 0, declare, &out);
  auto pushOf = [&](int worker, uint64_t round, float grad) {
    auto push = message(pb::CMD_PUSH_ROWS, round, {20});
    std::vector<float> grads(kDim, grad);
    push.payload = Blob::copyOf(grads.data(), grads.size() * sizeof(float));
    store.handle(worker + 1, worker, 0, push, &out);
    REQUIRE(wire::commandOf(out.back().data) == pb::CMD_REPLY);
  };
  auto rowOf = [](const Outgoing& o) {
    REQUIRE(wire::commandOf(o.data) == pb::CMD_REPLY);
    REQUIRE(o.payload.size() == kDim * sizeof(float));
    std::vector<float> row(kDim);
    std::memcpy(row.data(), o.payload.data(), o.payload.size());
    return row;
  };
  pushOf(0, 1, 1);
  pushOf(1, 1, 2);  // round 1 applied: -3
  out.clear();
  store.handle(1, 0, 0, message(pb::CMD_PULL_ROWS, 3, {20}), &out);
  CHECK(out.empty());  // held: round 2 is not applied
  pushOf(0, 2, 4);
  REQUIRE(out.size() == 1);  // the push's ack only: worker 1's round 2 is missing
  pushOf(1, 2, 8);
  REQUIRE(out.size() == 3);  // worker 1's ack, then the prefetch
  const std::vector<float> prefetched = rowOf(out[2]);
  CHECK(prefetched == std::vector<float>(kDim, -15.0f));
  out.clear();
  store.handle(1, 0, 0, message(pb::CMD_PULL_ROWS, 3, {20}), &out);
  REQUIRE(out.size() == 1);
  CHECK(rowOf(out[0]) == prefetched);
  // completed is 2: a pull may wait for round 2 + kMaxPullRoundsAhead - 1, not one more.
  out.clear();
  store.handle(2, 1, 0, message(pb::CMD_PULL_ROWS, 2 + ParamStore::kMaxPullRoundsAhead, {20}), &out);
  CHECK(out.empty());
  store.handle(2, 1, 0, message(pb::CMD_PULL_ROWS, 3 + ParamStore::kMaxPullRoundsAhead, {20}), &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK_THAT(out[0].data.error().text(), Catch::Contains("table 'emb' round 7: pull is too far ahead of round 2"));
}

}  // namespace
// A table name declared at another key (the workers declared their tables at different points) is
// refused, naming the table and both keys; the first key stays usable.
TEST_CASE("param store: one table name at two keys is refused") {
  ParamStore store(kWorkers, ShardPlace{}, /*budget=*/nullptr, nullptr);
  std::vector<Outgoing> out;
  auto declare = message(pb::CMD_DECLARE, 0, {});
  declare.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  declare.data.mutable_declare()->set_name("emb");
  declare.data.mutable_declare()->mutable_optimizer()->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kSgd));
  declare.data.mutable_declare()->mutable_optimizer()->set_lr(1.0f);
  store.handle(0, 0, 0, declare, &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  auto elsewhere = declare;
  elsewhere.data.mutable_declare()->set_key(kTable + (1 << 16));
  out.clear();
  store.handle(1, 1, 0, elsewhere, &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK_THAT(out[0].data.error().text(),
             Catch::Contains("table 'emb' is declared at key " + std::to_string(kTable + (1 << 16)) +
                             " but another worker declared it at key 77"));
  out.clear();
  store.handle(1, 1, 0, declare, &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
}

}  // namespace zps
