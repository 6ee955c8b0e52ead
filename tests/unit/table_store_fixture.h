// A ParamStore driven as one worker drives it (sync rounds of PUSH_ROWS, PULL_ROWS, CHECKPOINT), for
// the tests of server tables: eviction, row formats and incremental checkpoints.
#pragma once

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/optimizer.h"
#include "server/param_store.h"

namespace zps::testing {

struct TableOptions {
  kernels::OptimizerKind optimizer = kernels::OptimizerKind::kSgd;
  uint32_t dim = 4;
  uint64_t restore_step = 0;
};

class TableDriver {
 public:
  static constexpr uint64_t kKey = 9;

  TableDriver(ShardPlace place, MemoryBudget* budget, TableOptions options = {})
      : options_(options), store_(std::make_unique<ParamStore>(1, std::move(place), budget)) {
    wire::DataMessage declare;
    declare.data.set_request_id(++request_);
    pb::Declare* d = declare.data.mutable_declare();
    d->set_key(kKey);
    d->set_mode(pb::MODE_PARAM);
    d->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    d->set_row_dim(options_.dim);
    d->set_name("emb");
    d->set_restore_step(options.restore_step);
    auto* o = d->mutable_optimizer();
    o->set_kind(static_cast<uint32_t>(options.optimizer));
    o->set_lr(0.5f);
    o->set_momentum(0.9f);
    o->set_beta1(0.9f);
    o->set_beta2(0.999f);
    o->set_eps(1e-8f);
    o->set_initial_accumulator(0.1f);
    o->set_init_scale(0.5f);
    o->set_init_seed(3);
    declared_ = handle(declare);
  }

  ParamStore& store() { return *store_; }
  const Outgoing& declared() const { return declared_; }
  uint64_t round() const { return round_; }
  TableCounts counts() const { return store_->tableCounts().at("emb"); }

  // The gradient the tests push for `key` in `round`: exact in every row format's arithmetic.
  static float grad(uint64_t key, uint64_t round, uint32_t j) {
    return 0.0625f * static_cast<float>((key * 7 + round * 3 + j) % 11) - 0.25f;
  }

  // One round: pushes a gradient for each of `keys`, which applies the round. The reply (an error
  // leaves the round to a later push).
  Outgoing push(const std::vector<uint64_t>& keys) {
    ++round_;
    std::vector<float> grads(keys.size() * options_.dim);
    for (size_t i = 0; i < keys.size(); ++i)
      for (uint32_t j = 0; j < options_.dim; ++j) grads[i * options_.dim + j] = grad(keys[i], round_, j);
    auto m = rowsMessage(/*push=*/true, round_, keys);
    m.payload = Blob::copyOf(grads.data(), grads.size() * sizeof(float));
    Outgoing reply = handle(m);
    if (!reply.data.has_reply()) --round_;  // refused: the round is still to come
    return reply;
  }

  // The rows of `keys` as of the last applied round (a pull of the next round).
  std::vector<float> pull(const std::vector<uint64_t>& keys) {
    Outgoing o = handle(rowsMessage(/*push=*/false, round_ + 1, keys));
    REQUIRE(wire::commandOf(o.data) == pb::CMD_REPLY);
    REQUIRE(o.payload.size() == keys.size() * options_.dim * sizeof(float));
    std::vector<float> rows(keys.size() * options_.dim);
    std::memcpy(rows.data(), o.payload.data(), o.payload.size());
    return rows;
  }

  // Checkpoints the table at the last applied round.
  Outgoing checkpoint() {
    wire::DataMessage m;
    m.data.set_request_id(++request_);
    m.data.mutable_checkpoint()->set_key(kKey);
    m.data.mutable_checkpoint()->set_step(round_);
    return handle(m);
  }

 private:
  // A PUSH_ROWS (push) or PULL_ROWS of `keys` in `round`.
  wire::DataMessage rowsMessage(bool push, uint64_t round, const std::vector<uint64_t>& keys) {
    wire::DataMessage m;
    m.data.set_request_id(++request_);
    pb::Rows* r = m.data.mutable_rows();
    r->set_push(push);
    r->set_key(kKey);
    r->set_round(round);
    r->set_row_dim(options_.dim);
    r->set_count(keys.size());
    m.dtype = DType::kFloat32;
    m.keys = Blob::copyOf(keys.data(), keys.size() * sizeof(uint64_t));
    return m;
  }

  Outgoing handle(const wire::DataMessage& m) {
    std::vector<Outgoing> out;
    store_->handle(1, 0, 0, m, &out);
    REQUIRE(out.size() == 1);
    return std::move(out[0]);
  }

  const TableOptions options_;
  std::unique_ptr<ParamStore> store_;
  Outgoing declared_;
  uint64_t round_ = 0;
  uint64_t request_ = 0;
};

}  // namespace zps::testing
