// Tests for PushScheduler (worker/scheduling/push_scheduler.h): the order requests leave in (priority, then
// arrival, per server), credits, what completion and cancellation give back, resends, and push hints
// (hurry()).
#include "worker/scheduling/push_scheduler.h"

#include <string>

#include "ps/wire/codec.h"

#include <catch2/catch.hpp>
#include <utility>
#include <vector>

namespace zps {
namespace {

// A scheduler whose send records the ids it sent, in order.
struct Recorder {
  std::vector<uint64_t> sent;
  PushScheduler scheduler;

  explicit Recorder(size_t credit)
      : scheduler(credit, [this](const RequestSpec& to, std::vector<Blob>) {
          sent.push_back(to.id);
          return Status::OK();
        }) {}

  // A request `id` to `server`; no priority: sent at once.
  void send(uint64_t id, int server, std::optional<int64_t> priority, size_t credit) {
    RequestSpec r = RequestSpec::to(server);
    r.id = id;
    r.priority = priority;
    r.credit = credit;
    REQUIRE(scheduler.send(r, {}).ok());
  }
  // A scheduled request of `key` round `round` to server 0 (push hints name rounds).
  void sendRound(uint64_t id, uint64_t key, uint64_t round, int64_t priority, size_t credit) {
    RequestSpec r = RequestSpec::to(0, key);
    r.round = round;
    r.id = id;
    r.priority = priority;
    r.credit = credit;
    REQUIRE(scheduler.send(r, {}).ok());
  }
};

TEST_CASE("push scheduler: queued requests leave by priority, then by arrival, as credit comes back",
          "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 5, 100);  // fills the credit: sent
  r.send(2, 0, 9, 60);
  r.send(3, 0, 1, 60);
  r.send(4, 0, 1, 0);  // a pull behind its push (same priority, later arrival)
  r.send(5, 0, 0, 60);
  CHECK(r.sent == std::vector<uint64_t>{1});
  CHECK(r.scheduler.queued() == 4);
  CHECK(r.scheduler.inFlightBytes(0) == 100);
  r.scheduler.completed(1);
  // 5 (priority 0) fits alone; 3 would make 120 > 100.
  CHECK(r.sent == std::vector<uint64_t>{1, 5});
  r.scheduler.completed(5);
  // 3 goes, then its pull (no credit), then 2 would make 120.
  CHECK(r.sent == std::vector<uint64_t>{1, 5, 3, 4});
  r.scheduler.completed(3);
  CHECK(r.sent == std::vector<uint64_t>{1, 5, 3, 4, 2});
  r.scheduler.completed(4);
  r.scheduler.completed(2);
  CHECK(r.scheduler.queued() == 0);
  CHECK(r.scheduler.inFlightBytes(0) == 0);
}

TEST_CASE("push scheduler: each server has its own queue and credit", "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 3, 100);
  r.send(2, 1, 3, 100);  // another server: its credit is free
  r.send(3, 0, 0, 10);
  r.send(4, 1, 1, 10);
  CHECK(r.sent == std::vector<uint64_t>{1, 2});
  r.scheduler.completed(2);
  CHECK(r.sent == std::vector<uint64_t>{1, 2, 4});
  CHECK(r.scheduler.inFlightBytes(0) == 100);
  CHECK(r.scheduler.inFlightBytes(1) == 10);
}

TEST_CASE("push scheduler: a request larger than the credit goes alone", "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 0, 500);
  r.send(2, 0, 0, 500);
  CHECK(r.sent == std::vector<uint64_t>{1});
  r.scheduler.completed(1);
  CHECK(r.sent == std::vector<uint64_t>{1, 2});
}

TEST_CASE("push scheduler: requests without a priority leave at once, whatever the credit", "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 0, 100);
  r.send(2, 0, 0, 100);
  r.send(3, 0, std::nullopt, 0);
  CHECK(r.sent == std::vector<uint64_t>{1, 3});
  r.scheduler.completed(3);  // unknown to the scheduler: no credit comes back
  CHECK(r.sent == std::vector<uint64_t>{1, 3});
  CHECK(r.scheduler.inFlightBytes(0) == 100);
}

TEST_CASE("push scheduler: a cancelled queued request is dropped, never sent", "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 0, 100);
  r.send(2, 0, 0, 100);
  r.send(3, 0, 0, 100);
  r.scheduler.completed(2);  // cancelled while queued
  CHECK(r.scheduler.queued() == 1);
  r.scheduler.completed(1);
  CHECK(r.sent == std::vector<uint64_t>{1, 3});
}

TEST_CASE("push scheduler: a resend of a queued request waits, one in flight goes again on its credit",
          "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 0, 100);
  r.send(2, 0, 0, 100);
  r.send(2, 0, 0, 100);  // resent while queued: nothing more queued, nothing sent
  CHECK(r.scheduler.queued() == 1);
  r.send(1, 0, 0, 100);  // resent in flight
  CHECK(r.sent == std::vector<uint64_t>{1, 1});
  CHECK(r.scheduler.inFlightBytes(0) == 100);
  r.scheduler.completed(1);
  CHECK(r.sent == std::vector<uint64_t>{1, 1, 2});
  CHECK(r.scheduler.inFlightBytes(0) == 100);
}

TEST_CASE("push scheduler: clear() forgets the queues and the credit held", "[push_scheduler]") {
  Recorder r(100);
  r.send(1, 0, 0, 100);
  r.send(2, 0, 0, 100);
  r.scheduler.clear();
  CHECK(r.scheduler.queued() == 0);
  CHECK(r.scheduler.inFlightBytes(0) == 0);
  r.scheduler.completed(1);  // a late completion of a forgotten request changes nothing
  r.send(3, 0, 0, 100);
  CHECK(r.sent == std::vector<uint64_t>{1, 3});
}

// Fusion (ZPS_FUSION_BYTES): what leaves together for one server travels as one message.
TEST_CASE("push scheduler: a fan-out's scheduled requests, and those released together, leave fused",
          "[push_scheduler][fusion]") {
  std::vector<std::vector<uint64_t>> messages;  // the keys of each message sent
  PushScheduler scheduler(
      250,
      [&](const RequestSpec&, std::vector<Blob> frames) {
        auto decoded = wire::decode(frames, wire::Limits());
        REQUIRE(decoded.ok());
        const auto& m = std::get<wire::DataMessage>(*decoded);
        std::vector<uint64_t> keys;
        if (!m.data.has_fused()) keys.push_back(wire::keyOf(m.data));
        for (const auto& e : m.entries) keys.push_back(wire::keyOf(e.data));
        messages.push_back(keys);
        return Status::OK();
      },
      FusionPolicy{1024, nullptr});
  auto push = [](uint64_t id, int64_t priority) {
    pb::Data d;
    d.set_request_id(id);
    pb::Tensor* t = d.mutable_tensor();
    t->set_op(pb::OP_PUSH);
    t->set_key(id);
    t->set_round(1);
    t->set_num_elements(25);
    t->set_dtype(static_cast<uint32_t>(DType::kFloat32));
    ReadyRequest r{RequestSpec::to(0, id, DType::kFloat32),
                   wire::encodeData(d, Blob::copyOf(std::string(100, 'x').data(), 100))};
    r.to.id = id;
    r.to.priority = priority;
    r.to.credit = 100;
    r.to.fuse_bytes = 100;
    return r;
  };
  std::vector<ReadyRequest> fan;
  for (uint64_t id = 1; id <= 6; ++id) fan.push_back(push(id, static_cast<int64_t>(id)));
  REQUIRE(scheduler.sendAll(std::move(fan)).ok());
  // All six queued first, then the two that fit the credit of 250 leave together.
  REQUIRE(messages.size() == 1);
  CHECK(messages[0] == std::vector<uint64_t>{1, 2});
  {
    // The answers of one fused reply: their credit comes back first, then what fits leaves at once.
    PushScheduler::Deferral together(&scheduler);
    scheduler.completed(1);
    scheduler.completed(2);
    CHECK(messages.size() == 1);
  }
  REQUIRE(messages.size() == 2);
  CHECK(messages[1] == std::vector<uint64_t>{3, 4});
  // Without a deferral each completion sends what it released at once: alone.
  scheduler.completed(3);
  REQUIRE(messages.size() == 3);
  CHECK(messages[2] == std::vector<uint64_t>{5});
}

// Push hints as a server's reply carries them: (key, round) pairs.
google::protobuf::RepeatedPtrField<pb::AwaitedRound> awaited(const std::vector<std::pair<uint64_t, uint64_t>>& rounds) {
  pb::Reply reply;
  for (const auto& [key, round] : rounds) {
    auto* a = reply.add_awaited();
    a->set_key(key);
    a->set_round(round);
  }
  return reply.awaited();
}

TEST_CASE("push hints: the scheduler sends a named round's push and pull next, ahead of any priority", "[push_hints]") {
  Recorder r(100);
  r.sendRound(1, 10, 1, 0, 100);  // in flight: fills the credit
  r.sendRound(2, 11, 1, 1, 100);  // push and pull of key 11 (priority 1)
  r.sendRound(3, 11, 1, 1, 0);
  r.sendRound(4, 12, 1, 5, 100);  // push and pull of key 12 (priority 5)
  r.sendRound(5, 12, 1, 5, 0);
  r.sendRound(6, 13, 1, 6, 100);  // push of key 13 (priority 6)
  REQUIRE(r.sent == std::vector<uint64_t>{1});
  // A round of another number, a key not queued and another server's queue are left alone.
  r.scheduler.hurry(0, awaited({{12, 2}, {99, 1}}));
  r.scheduler.hurry(1, awaited({{13, 1}}));
  CHECK(r.scheduler.hurried() == 0);
  // Keys 13 and 12 wait for this worker alone: they go first, by priority among themselves.
  r.scheduler.hurry(0, awaited({{13, 1}, {12, 1}}));
  CHECK(r.scheduler.hurried() == 3);
  CHECK(r.sent == std::vector<uint64_t>{1});  // they leave when credit comes back
  r.scheduler.completed(1);
  CHECK(r.sent == std::vector<uint64_t>{1, 4, 5});
  // Named again once sent: nothing left to move.
  r.scheduler.hurry(0, awaited({{12, 1}}));
  CHECK(r.scheduler.hurried() == 3);
  r.scheduler.completed(4);
  CHECK(r.sent == std::vector<uint64_t>{1, 4, 5, 6});
  r.scheduler.completed(6);
  CHECK(r.sent == std::vector<uint64_t>{1, 4, 5, 6, 2, 3});
  for (uint64_t id : {5, 2, 3}) r.scheduler.completed(id);
  CHECK(r.scheduler.queued() == 0);
  CHECK(r.scheduler.inFlightBytes(0) == 0);
}

TEST_CASE("push hints: a hurried request that is cancelled is dropped from the head", "[push_hints]") {
  Recorder r(100);
  r.sendRound(1, 10, 1, 0, 100);
  r.sendRound(2, 11, 1, 3, 100);
  r.sendRound(3, 12, 1, 4, 100);
  r.scheduler.hurry(0, awaited({{12, 1}}));
  r.scheduler.completed(3);  // cancelled while queued
  r.scheduler.completed(1);
  CHECK(r.sent == std::vector<uint64_t>{1, 2});
  CHECK(r.scheduler.queued() == 0);
}

}  // namespace
}  // namespace zps
