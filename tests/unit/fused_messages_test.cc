// Fused messages end to end without a network: a worker's requests fused (worker/scheduling/fusion.h), decoded by
// the codec, each entry applied to a SumStore as the server's dispatcher does (server/fused_messages.h),
// and the answers packed. Exact sums, an answer per entry (errors included), answers to the sender fused
// and to other workers alone, and a resent fused message summed once.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "server/fused_messages.h"
#include "tests/unit/sum_store_fixture.h"
#include "worker/scheduling/fusion.h"

namespace zps {
namespace {

using namespace sum_store_testing;

constexpr uint64_t kOtherKey = 8;

ReadyRequest ready(const wire::DataMessage& m) {
  ReadyRequest r;
  r.to = RequestSpec::to(0, wire::keyOf(m.data), m.dtype);
  r.to.fuse_bytes = m.payload.empty() ? 16 : m.payload.size();
  r.frames = wire::encodeData(m.data, m.payload);
  return r;
}

std::vector<Blob> fusedOf(const std::vector<wire::DataMessage>& requests) {
  std::vector<ReadyRequest> all;
  for (const auto& m : requests) all.push_back(ready(m));
  std::vector<ReadyRequest*> group;
  for (auto& r : all) group.push_back(&r);
  auto frames = fuseRequests(group);
  REQUIRE(frames.ok());
  return *frames;
}

// What the server's dispatcher does with a fused message from `worker`.
std::vector<Outgoing> applyFused(StoreFixture& f, int worker, const std::vector<Blob>& frames) {
  auto decoded = wire::decode(frames, wire::Limits());
  REQUIRE(decoded.ok());
  auto& fused = std::get<wire::DataMessage>(*decoded);
  REQUIRE(wire::commandOf(fused.data) == pb::CMD_FUSED);
  std::vector<Outgoing> out;
  for (auto& e : fused.entries) f.store().handle(peerOf(worker), worker, entryAsRequest(std::move(e)), &out);
  return out;
}

std::vector<float> twice(std::vector<float> v) {
  for (float& x : v) x *= 2;
  return v;
}

TEST_CASE("fusion: fused push-pulls sum exactly and the sender's answers come back fused", "[fusion]") {
  StoreFixture f;
  for (int w = 0; w < kWorkers; ++w) {
    f.declare(w, kKey, kElems);
    f.declare(w, kOtherKey, kElems);
  }
  std::vector<Outgoing> last;
  for (int w = 0; w < kWorkers; ++w) {
    auto a = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kKey, 1, DType::kFloat32, pushValues(w, 1));
    auto b = StoreFixture::pushMessage(pb::CMD_PUSH_PULL, kOtherKey, 1, DType::kFloat32, twice(pushValues(w, 1)));
    last = applyFused(f, w, fusedOf({a, b}));
    if (w + 1 < kWorkers) CHECK(last.empty());  // parked until every worker pushed
  }
  REQUIRE(last.size() == 2 * kWorkers);
  auto messages = packReplies(peerOf(kWorkers - 1), std::move(last));
  // Workers 0 and 1 get their two sums alone (4 messages); the sender gets one fused reply.
  REQUIRE(messages.size() == 2 * (kWorkers - 1) + 1);
  int fused_replies = 0;
  for (auto& [peer, frames] : messages) {
    auto decoded = wire::decode(frames, wire::Limits());
    REQUIRE(decoded.ok());
    const auto& m = std::get<wire::DataMessage>(*decoded);
    if (peer != peerOf(kWorkers - 1)) {
      CHECK(wire::commandOf(m.data) == pb::CMD_REPLY);
      CHECK(floatsOf(m.payload) == (wire::keyOf(m.data) == kKey ? expectedSum(1) : twice(expectedSum(1))));
      continue;
    }
    ++fused_replies;
    REQUIRE(wire::commandOf(m.data) == pb::CMD_FUSED);
    REQUIRE(m.entries.size() == 2);
    CHECK(wire::keyOf(m.entries[0].data) == kKey);
    CHECK(floatsOf(m.entries[0].payload) == expectedSum(1));
    CHECK(wire::keyOf(m.entries[1].data) == kOtherKey);
    CHECK(floatsOf(m.entries[1].payload) == twice(expectedSum(1)));
  }
  CHECK(fused_replies == 1);
}

TEST_CASE("fusion: a resent fused message is acknowledged again and summed once", "[fusion]") {
  StoreFixture f;
  for (int w = 0; w < kWorkers; ++w) {
    f.declare(w, kKey, kElems);
    f.declare(w, kOtherKey, kElems);
  }
  auto a = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kFloat32, pushValues(0, 1));
  auto b = StoreFixture::pushMessage(pb::CMD_PUSH, kOtherKey, 1, DType::kFloat32, pushValues(0, 1));
  const std::vector<Blob> frames = fusedOf({a, b});
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto acks = applyFused(f, 0, frames);
    REQUIRE(acks.size() == 2);
    checkAck(acks[0], 0, 1);
    CHECK(wire::keyOf(acks[1].data) == kOtherKey);
    CHECK(wire::commandOf(acks[1].data) == pb::CMD_REPLY);
  }
  for (int w = 1; w < kWorkers; ++w) {
    f.push(w, 1, pushValues(w, 1));
    f.push(w, 1, pushValues(w, 1), pb::CMD_PUSH, kOtherKey);
  }
  // And once more after the round completed: still acknowledged, not added.
  CHECK(applyFused(f, 0, frames).size() == 2);
  for (uint64_t key : {kKey, kOtherKey}) {
    auto sum = f.pull(1, 1, key);
    REQUIRE(sum.size() == 1);
    CHECK(floatsOf(sum[0].payload) == expectedSum(1));
  }
}

TEST_CASE("fusion: every fused entry gets its own answer, errors included", "[fusion]") {
  StoreFixture f;
  for (int w = 0; w < kWorkers; ++w) f.declare(w, kKey, kElems);
  f.declare(0, kOtherKey, kElems);
  auto good = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kFloat32, pushValues(0, 1));
  auto undeclared = StoreFixture::pushMessage(pb::CMD_PUSH, 99, 1, DType::kFloat32, pushValues(0, 1));
  auto wrong_size = StoreFixture::pushMessage(pb::CMD_PUSH, kOtherKey, 1, DType::kFloat32, std::vector<float>(3, 1));
  auto out = applyFused(f, 0, fusedOf({good, undeclared, wrong_size}));
  REQUIRE(out.size() == 3);
  checkAck(out[0], 0, 1);
  CHECK(wire::commandOf(out[1].data) == pb::CMD_ERROR);
  CHECK(out[1].data.request_id() == undeclared.data.request_id());
  CHECK_THAT(out[1].data.error().text(), Catch::Contains("key 99 was never declared"));
  CHECK(wire::commandOf(out[2].data) == pb::CMD_ERROR);
  CHECK(out[2].data.request_id() == wrong_size.data.request_id());
  CHECK_THAT(out[2].data.error().text(), Catch::Contains("does not match the declared"));
  // Packed for the sender: one fused reply whose entries decode to the same answers.
  auto messages = packReplies(peerOf(0), std::move(out));
  REQUIRE(messages.size() == 1);
  auto decoded = wire::decode(messages[0].second, wire::Limits());
  REQUIRE(decoded.ok());
  const auto& m = std::get<wire::DataMessage>(*decoded);
  REQUIRE(m.entries.size() == 3);
  CHECK(wire::commandOf(m.entries[2].data) == pb::CMD_ERROR);
}

TEST_CASE("fusion: a refused fused message answers each entry", "[fusion]") {
  auto a = StoreFixture::pushMessage(pb::CMD_PUSH, kKey, 1, DType::kFloat32, pushValues(0, 1));
  auto b = StoreFixture::header(pb::CMD_PULL, kKey, 1, DType::kFloat32, 0);
  pb::Data rejected;
  REQUIRE_FALSE(wire::decode(fusedOf({a, b}), wire::Limits(), &rejected).ok());  // key 7 twice
  auto out = refuseEntries(peerOf(0), rejected, "key 7 appears twice");
  REQUIRE(out.size() == 2);
  CHECK(out[0].data.request_id() == a.data.request_id());
  CHECK(out[1].data.request_id() == b.data.request_id());
  CHECK_THAT(out[1].data.error().text(), Catch::Contains("refused fused message: key 7 appears twice"));
}

TEST_CASE("fusion: sendReady fuses small requests per server, each key once per message", "[fusion]") {
  std::vector<std::pair<RequestSpec, std::vector<Blob>>> sent;
  auto send = [&](const RequestSpec& to, std::vector<Blob> frames) {
    sent.emplace_back(to, std::move(frames));
    return Status::OK();
  };
  auto pull = [](int server, uint64_t key, size_t bytes) {
    ReadyRequest r = ready(StoreFixture::header(pb::CMD_PULL, key, 1, DType::kFloat32, bytes / 4));
    r.to.server = server;
    r.to.fuse_bytes = bytes;
    return r;
  };
  std::vector<ReadyRequest> batch;
  batch.push_back(pull(0, 1, 100));
  batch.push_back(pull(0, 2, 100));
  batch.push_back(pull(0, 1, 100));   // key 1 again: a later message
  batch.push_back(pull(0, 3, 4096));  // not below the fusion size: alone, first
  batch.push_back(pull(1, 4, 100));   // the only one for server 1: alone
  batch.push_back(pull(0, 5, 900));   // over the size left in the first message: joins the second
  REQUIRE(sendReady(std::move(batch), FusionPolicy{1024, nullptr}, send).ok());
  REQUIRE(sent.size() == 4);
  auto entriesOf = [](const std::vector<Blob>& frames) {
    auto decoded = wire::decode(frames, wire::Limits());
    REQUIRE(decoded.ok());
    const auto& m = std::get<wire::DataMessage>(*decoded);
    std::vector<uint64_t> keys;
    if (wire::commandOf(m.data) != pb::CMD_FUSED) return std::vector<uint64_t>{wire::keyOf(m.data)};
    for (const auto& e : m.entries) keys.push_back(wire::keyOf(e.data));
    return keys;
  };
  CHECK(entriesOf(sent[0].second) == std::vector<uint64_t>{3});
  CHECK(sent[1].first.server == 0);
  CHECK(entriesOf(sent[1].second) == std::vector<uint64_t>{1, 2});
  CHECK(entriesOf(sent[2].second) == std::vector<uint64_t>{1, 5});
  CHECK(sent[3].first.server == 1);
  CHECK(entriesOf(sent[3].second) == std::vector<uint64_t>{4});
  // Off: everything alone, in order.
  sent.clear();
  std::vector<ReadyRequest> again;
  again.push_back(pull(0, 1, 100));
  again.push_back(pull(0, 2, 100));
  REQUIRE(sendReady(std::move(again), FusionPolicy{0, nullptr}, send).ok());
  CHECK(sent.size() == 2);
}

TEST_CASE("fusion: requests for a server that does not accept fused messages go alone", "[fusion]") {
  std::vector<std::pair<int, pb::DataCommand>> sent;  // server, command
  auto send = [&](const RequestSpec& to, std::vector<Blob> frames) {
    auto decoded = wire::decode(frames, wire::Limits());
    REQUIRE(decoded.ok());
    sent.emplace_back(to.server, wire::commandOf(std::get<wire::DataMessage>(*decoded).data));
    return Status::OK();
  };
  std::vector<ReadyRequest> batch;
  for (int server : {0, 1, 0, 1}) {
    ReadyRequest r = ready(StoreFixture::header(pb::CMD_PULL, 10 + batch.size(), 1, DType::kFloat32, 25));
    r.to.server = server;
    r.to.fuse_bytes = 100;
    batch.push_back(std::move(r));
  }
  // Server 1 is an older one: its HELLO reply did not say accepts_fused.
  REQUIRE(sendReady(std::move(batch), FusionPolicy{1024, [](int server) { return server == 0; }}, send).ok());
  REQUIRE(sent.size() == 3);
  CHECK(sent[0] == std::make_pair(1, pb::CMD_PULL));
  CHECK(sent[1] == std::make_pair(1, pb::CMD_PULL));
  CHECK(sent[2] == std::make_pair(0, pb::CMD_FUSED));
}

}  // namespace
}  // namespace zps
