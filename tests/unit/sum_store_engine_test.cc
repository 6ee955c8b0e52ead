// Tests for the summation store with an engine that holds a round's sum until collect(), as the CUDA
// engine does (server/sum_store.cc with a CPU twin of that engine): exact sums, compressed pushes,
// a reset mid-round and an engine failure.
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/sum_store_fixture.h"

namespace zps {
namespace {

using namespace sum_store_testing;

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
  fp16.data.mutable_tensor()->set_encoding(pb::ENCODING_FP16);
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
    declare.data.mutable_declare()->set_name("grad");
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
  CHECK(wire::commandOf(out[1].data) == pb::CMD_ERROR);
  CHECK_THAT(out[1].data.error().text(),
             Catch::Contains("deferred engine failed to produce round 1") && Catch::Contains("device copy failed"));
  checkError(f.pull(0, 1), 0, "no longer kept");
}

}  // namespace
}  // namespace zps
