// Tests for async exactly-once (server/sequence_window.h): the window's verdicts, and the two
// stores that use it. An async sum key and an async table each add a numbered push once however often
// it arrives, in any order within the window; a number out of the window, or none, is refused with a
// reason; a new store (what a server starts each ZPS_RECOVERY generation with) takes number 1 again.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reducer.h"
#include "server/param_store.h"
#include "server/sequence_window.h"
#include "server/sum_store.h"

namespace zps {
namespace {

using Verdict = SequenceWindow::Verdict;

Verdict verdictOf(const SequenceWindow& w, uint64_t seq) {
  std::string why;
  return w.check(seq, &why);
}

TEST_CASE("sequence window: each number is applied once, in any order within the window") {
  SequenceWindow w;
  std::string why;
  CHECK(w.check(0, &why) == Verdict::kRefused);
  CHECK(why == "an async push needs a sequence number (push_seq from 1)");
  // 2 overtakes 1 (1 was dropped and is resent later).
  REQUIRE(verdictOf(w, 2) == Verdict::kApply);
  w.applied(2);
  CHECK(verdictOf(w, 2) == Verdict::kDuplicate);
  REQUIRE(verdictOf(w, 1) == Verdict::kApply);
  w.applied(1);
  CHECK(verdictOf(w, 1) == Verdict::kDuplicate);
  CHECK(verdictOf(w, 3) == Verdict::kApply);
  CHECK(w.newest() == 2);
}

TEST_CASE("sequence window: numbers 64 behind the newest or more than 64 past it are refused with a reason") {
  SequenceWindow w;
  std::string why;
  CHECK(w.check(64, &why) == Verdict::kApply);  // as far as a worker's window reaches before any answer
  CHECK(w.check(65, &why) == Verdict::kRefused);
  CHECK(why == "async push number 65 is more than 64 past the newest applied (0)");
  w.applied(64);
  CHECK(verdictOf(w, 1) == Verdict::kApply);  // 63 behind: still told apart
  w.applied(65);
  CHECK(w.check(1, &why) == Verdict::kRefused);
  CHECK(why ==
        "async push number 1 is 64 or more behind the newest applied (65): too old to tell whether it was applied, "
        "so it is not");
  CHECK(verdictOf(w, 2) == Verdict::kApply);
  w.applied(2);
  CHECK(verdictOf(w, 2) == Verdict::kDuplicate);
  CHECK(verdictOf(w, 64) == Verdict::kDuplicate);
  // A jump of the whole window forgets everything before it.
  w.applied(129);
  CHECK(verdictOf(w, 129) == Verdict::kDuplicate);
  CHECK(verdictOf(w, 66) == Verdict::kApply);
  CHECK(verdictOf(w, 65) == Verdict::kRefused);
  CHECK(verdictOf(w, UINT64_MAX) == Verdict::kRefused);
}

constexpr uint64_t kKey = 9;
constexpr int kWorkers = 4;

wire::DataMessage sumMessage(pb::DataCommand command, uint64_t seq, float value) {
  static uint64_t request = 5000;
  wire::DataMessage m;
  m.data.set_request_id(++request);
  if (command == pb::CMD_DECLARE) {
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kKey);
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    d->set_num_elements(1);
    d->set_mode(pb::MODE_SUM);
    d->set_async(true);
    d->set_name("counter");
  } else {
    pb::Tensor* t = m.data.mutable_tensor();
    t->set_op(wire::tensorOp(command));
    t->set_key(kKey);
    t->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    t->set_num_elements(1);
    t->set_push_seq(seq);
  }
  m.dtype = DType::kFloat32;
  if (command != pb::CMD_DECLARE && command != pb::CMD_PULL) m.payload = Blob::copyOf(&value, sizeof(value));
  return m;
}

float counterOf(SumStore& store) {
  std::vector<Outgoing> out;
  store.handle(1, 0, sumMessage(pb::CMD_PULL, 0, 0), &out);
  REQUIRE(out.size() == 1);
  REQUIRE(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  float v = 0;
  REQUIRE(out[0].payload.size() == sizeof(v));
  std::memcpy(&v, out[0].payload.data(), sizeof(v));
  return v;
}

TEST_CASE("async sum key: 4 workers x 25 increments, each sent twice and out of order, read exactly 100") {
  auto reducer = kernels::makeCpuReducer();
  SumStore store(kWorkers, reducer.get());
  std::vector<Outgoing> out;
  for (int w = 0; w < kWorkers; ++w) store.handle(w, w, sumMessage(pb::CMD_DECLARE, 0, 0), &out);
  const uint64_t duplicates_before = duplicateAsyncPushes();
  for (int w = 0; w < kWorkers; ++w) {
    // Pairs swapped (2, 1, 4, 3, ...), every push twice: what drops, resends and duplicates deliver.
    for (uint64_t i = 1; i <= 25; ++i) {
      const uint64_t seq = i % 2 == 1 ? (i == 25 ? 25 : i + 1) : i - 1;
      for (int copy = 0; copy < 2; ++copy) {
        out.clear();
        const auto command = copy == 0 ? pb::CMD_PUSH : pb::CMD_PUSH_PULL;
        store.handle(w, w, sumMessage(command, seq, 1.0f), &out);
        REQUIRE(out.size() == 1);
        CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);  // the copy is answered like the first
      }
    }
  }
  CHECK(counterOf(store) == 100.0f);
  CHECK(duplicateAsyncPushes() - duplicates_before == 100);
}

TEST_CASE("async sum key: a push without a number, or far outside the window, is refused and not added") {
  auto reducer = kernels::makeCpuReducer();
  SumStore store(2, reducer.get());
  std::vector<Outgoing> out;
  store.handle(0, 0, sumMessage(pb::CMD_DECLARE, 0, 0), &out);
  for (uint64_t seq : {uint64_t{0}, uint64_t{1000}}) {
    out.clear();
    store.handle(0, 0, sumMessage(pb::CMD_PUSH, seq, 5.0f), &out);
    REQUIRE(out.size() == 1);
    CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
    CHECK(out[0].data.error().text().find("key 9 of 'counter'") != std::string::npos);
  }
  out.clear();
  store.handle(1, 1, sumMessage(pb::CMD_PUSH, 1, 5.0f), &out);  // another worker's number 1 is its own
  store.handle(0, 0, sumMessage(pb::CMD_PUSH, 1, 2.0f), &out);
  CHECK(counterOf(store) == 7.0f);
}

TEST_CASE("async sum key: a new store (a new ZPS_RECOVERY generation) applies a replaced worker's number 1 again") {
  auto reducer = kernels::makeCpuReducer();
  for (int generation = 0; generation < 2; ++generation) {
    SumStore store(2, reducer.get());
    std::vector<Outgoing> out;
    store.handle(0, 0, sumMessage(pb::CMD_DECLARE, 0, 0), &out);
    for (uint64_t seq = 1; seq <= 3; ++seq) store.handle(1, 1, sumMessage(pb::CMD_PUSH, seq, 1.0f), &out);
    CHECK(counterOf(store) == 3.0f);
  }
}

wire::DataMessage rowMessage(pb::DataCommand command, uint64_t seq, const std::vector<uint64_t>& keys, float grad) {
  static uint64_t request = 9000;
  wire::DataMessage m;
  m.data.set_request_id(++request);
  if (command == pb::CMD_DECLARE) {
    pb::Declare* d = m.data.mutable_declare();
    d->set_key(kKey);
    d->set_row_dim(1);
    d->set_num_elements(keys.size());
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
  } else {
    pb::Rows* r = m.data.mutable_rows();
    r->set_push(command == pb::CMD_PUSH_ROWS);
    r->set_key(kKey);
    r->set_row_dim(1);
    r->set_count(keys.size());
    r->set_push_seq(seq);
  }
  m.dtype = DType::kFloat32;
  m.keys = Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t));
  if (command == pb::CMD_PUSH_ROWS) {
    std::vector<float> grads(keys.size(), grad);
    m.payload = Blob::copyOf(grads.data(), grads.size() * sizeof(float));
  }
  return m;
}

TEST_CASE("async table: every local rank's numbered pushes of a row apply once, however often they arrive") {
  // 2 workers x 2 local ranks: four pushers, each with its own numbers. SGD with lr 1 and rows that
  // start at 0: a gradient of -1 per push counts the pushes applied.
  ParamStore store(2, ShardPlace{});
  std::vector<Outgoing> out;
  auto declare = rowMessage(pb::CMD_DECLARE, 0, {}, 0);
  declare.data.mutable_declare()->set_mode(pb::MODE_PARAM);
  declare.data.mutable_declare()->set_name("counter-table");
  declare.data.mutable_declare()->set_async(true);
  declare.data.mutable_declare()->set_local_size(2);
  declare.data.mutable_declare()->mutable_optimizer()->set_kind(static_cast<uint32_t>(kernels::OptimizerKind::kSgd));
  declare.data.mutable_declare()->mutable_optimizer()->set_lr(1.0f);
  store.handle(0, 0, 0, declare, &out);
  REQUIRE(wire::commandOf(out.back().data) == pb::CMD_REPLY);
  for (int worker = 0; worker < 2; ++worker) {
    for (uint32_t local = 0; local < 2; ++local) {
      for (uint64_t seq = 25; seq >= 1; --seq) {  // newest first: every one overtaken
        for (int copy = 0; copy < 3; ++copy) {
          out.clear();
          store.handle(worker, worker, local, rowMessage(pb::CMD_PUSH_ROWS, seq, {42}, -1.0f), &out);
          REQUIRE(out.size() == 1);
          CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
        }
      }
    }
  }
  out.clear();
  store.handle(0, 0, 0, rowMessage(pb::CMD_PUSH_ROWS, 0, {42}, -1.0f), &out);
  REQUIRE(out.size() == 1);
  CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK(out[0].data.error().text().find("needs a sequence number") != std::string::npos);
  out.clear();
  store.handle(0, 0, 0, rowMessage(pb::CMD_PULL_ROWS, 0, {42}, 0), &out);
  REQUIRE(out.size() == 1);
  float v = 0;
  REQUIRE(out[0].payload.size() == sizeof(v));
  std::memcpy(&v, out[0].payload.data(), sizeof(v));
  CHECK(v == 100.0f);
}

}  // namespace
}  // namespace zps
