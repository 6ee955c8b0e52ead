// The summation store's test fixture (server/sum_store.h with the CPU reducer, or another engine):
// a store for kWorkers workers, messages built directly as wire::DataMessage values, the pushes
// whose sums are exact in float32, and checks of the replies. Shared by the sum_store*_test.cc files.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/reducer.h"
#include "server/sum_store.h"

namespace zps::sum_store_testing {

constexpr int kWorkers = 3;
constexpr uint64_t kKey = 7;
constexpr uint64_t kElems = 4;

inline PeerId peerOf(int worker) { return 100 + static_cast<PeerId>(worker); }

class StoreFixture {
 public:
  explicit StoreFixture(int workers = kWorkers, std::unique_ptr<kernels::Reducer> reducer = kernels::makeCpuReducer())
      : reducer_(std::move(reducer)), store_(workers, reducer_.get(), nullptr, &counts_) {}

  // A request of `cmd` as the codec hands it over: a Declare (MODE_SUM), a Tensor (PUSH, PULL,
  // PUSH_PULL), or the body of another command naming key and round where it has them.
  static wire::DataMessage header(pb::DataCommand cmd, uint64_t key, uint64_t round, DType dtype,
                                  uint64_t num_elements) {
    wire::DataMessage m;
    m.data.set_request_id(nextRequestId());
    switch (cmd) {
      case pb::CMD_DECLARE: {
        pb::Declare* d = m.data.mutable_declare();
        d->set_key(key);
        d->set_mode(pb::MODE_SUM);
        d->set_dtype(static_cast<uint32_t>(dtype));
        d->set_num_elements(num_elements);
        break;
      }
      case pb::CMD_PUSH:
      case pb::CMD_PULL:
      case pb::CMD_PUSH_PULL: {
        pb::Tensor* t = m.data.mutable_tensor();
        t->set_op(wire::tensorOp(cmd));
        t->set_key(key);
        t->set_round(round);
        t->set_dtype(static_cast<uint32_t>(dtype));
        t->set_num_elements(num_elements);
        break;
      }
      case pb::CMD_HELLO: m.data.mutable_hello(); break;
      case pb::CMD_STATS: m.data.mutable_stats(); break;
      case pb::CMD_REPLY: {
        pb::Reply* r = m.data.mutable_reply();
        r->set_key(key);
        r->set_round(round);
        r->set_dtype(static_cast<uint32_t>(dtype));
        r->set_num_elements(num_elements);
        break;
      }
      case pb::CMD_ERROR:
        m.data.mutable_error()->set_key(key);
        m.data.mutable_error()->set_round(round);
        break;
      default: FAIL("no test message for " << pb::DataCommand_Name(cmd));
    }
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
    m.data.mutable_declare()->set_name(name);
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
  SumCounts& counts() { return counts_; }

 private:
  static uint64_t nextRequestId() {
    static uint64_t id = 1000;
    return ++id;
  }
  std::unique_ptr<kernels::Reducer> reducer_;
  SumCounts counts_;  // an engine's counts, which outlive its store
  SumStore store_;
};

inline std::vector<float> floatsOf(const Blob& b) {
  REQUIRE(b.size() % sizeof(float) == 0);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// Worker w's push in round r: element i is (w + 1) * r + i, all exact in float32.
inline std::vector<float> pushValues(int w, uint64_t r) {
  std::vector<float> v(kElems);
  for (size_t i = 0; i < kElems; ++i) v[i] = static_cast<float>((w + 1) * r + i);
  return v;
}

// The sum of every worker's pushValues in round r.
inline std::vector<float> expectedSum(uint64_t r, int workers = kWorkers) {
  std::vector<float> v(kElems, 0.0f);
  for (int w = 0; w < workers; ++w)
    for (size_t i = 0; i < kElems; ++i) v[i] += static_cast<float>((w + 1) * r + i);
  return v;
}

inline void checkAck(const Outgoing& o, int worker, uint64_t round) {
  CHECK(o.peer == peerOf(worker));
  CHECK(wire::commandOf(o.data) == pb::CMD_REPLY);
  CHECK(wire::keyOf(o.data) == kKey);
  CHECK(wire::roundOf(o.data) == round);
  CHECK(o.payload.empty());
}

inline void checkSumReply(const Outgoing& o, int worker, uint64_t round, const std::vector<float>& sum) {
  CHECK(o.peer == peerOf(worker));
  CHECK(wire::commandOf(o.data) == pb::CMD_REPLY);
  CHECK(wire::keyOf(o.data) == kKey);
  CHECK(wire::roundOf(o.data) == round);
  CHECK(o.data.reply().num_elements() == kElems);
  CHECK(o.data.reply().dtype() == static_cast<uint32_t>(DType::kFloat32));
  CHECK(floatsOf(o.payload) == sum);
}

inline void checkError(const std::vector<Outgoing>& out, int worker, const std::string& needle) {
  REQUIRE(out.size() == 1);
  CHECK(out[0].peer == peerOf(worker));
  CHECK(wire::commandOf(out[0].data) == pb::CMD_ERROR);
  CHECK(out[0].payload.empty());
  CHECK_THAT(out[0].data.error().text(), Catch::Contains(needle));
}

inline void declareAll(StoreFixture& f, uint64_t key = kKey, uint64_t n = kElems) {
  for (int w = 0; w < kWorkers; ++w) {
    auto out = f.declare(w, key, n);
    REQUIRE(out.size() == 1);
    CHECK(wire::commandOf(out[0].data) == pb::CMD_REPLY);
  }
}

inline void pushRound(StoreFixture& f, uint64_t round) {
  for (int w = 0; w < kWorkers; ++w) {
    auto out = f.push(w, round, pushValues(w, round));
    REQUIRE(out.size() == 1);
    checkAck(out[0], w, round);
  }
}

}  // namespace zps::sum_store_testing
