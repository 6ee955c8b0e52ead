// Tests for the server's push pacer (ZPS_PUSH_PACING_BYTES, server/scheduling/push_pacer.h): the
// acknowledgements of a worker ahead of the slowest active worker wait until it catches up or for at
// most the deadline, and nothing else ever waits.
#include <chrono>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "server/scheduling/push_pacer.h"

namespace zps {
namespace {

using Clock = PushPacer::Clock;
using std::chrono::milliseconds;

// An answer to request `request_id`: a Reply, or (CMD_ERROR) an Error.
Outgoing ack(PeerId peer, uint64_t request_id, pb::DataCommand command = pb::CMD_REPLY) {
  Outgoing o;
  o.peer = peer;
  o.data.set_request_id(request_id);
  if (command == pb::CMD_ERROR)
    o.data.mutable_error();
  else
    o.data.mutable_reply();
  return o;
}

// A credit-holding push of `key`'s round 1, by default request `key`.
pb::Data push(uint64_t key, uint64_t request_id = 0) {
  pb::Data d;
  d.set_request_id(request_id == 0 ? key : request_id);
  pb::Tensor* t = d.mutable_tensor();
  t->set_op(pb::OP_PUSH);
  t->set_key(key);
  t->set_round(1);
  t->set_holds_credit(true);
  return d;
}

std::vector<uint64_t> idsOf(const std::vector<Outgoing>& sent) {
  std::vector<uint64_t> ids;
  for (const Outgoing& o : sent) ids.push_back(o.data.request_id());
  return ids;
}

// Worker w's connection in these tests.
PeerId peerOf(int worker) { return 100 + static_cast<PeerId>(worker); }

TEST_CASE("push pacer: a worker ahead by more than the lead waits for the slowest active one", "[push_pacer]") {
  PushPacer p(3, /*lead=*/1000, /*active=*/milliseconds(100), /*deadline=*/milliseconds(100));
  REQUIRE(p.enabled());
  const Clock::time_point t0 = Clock::now();
  std::vector<Outgoing> sent;
  // All three push 600 bytes: nobody is ahead, every acknowledgement leaves.
  for (int w = 0; w < 3; ++w) {
    p.arrived(peerOf(w), push(1), w, 600, &sent, t0);
    p.offer(ack(peerOf(w), 1), &sent, t0);
  }
  REQUIRE(sent.size() == 3);
  sent.clear();

  // Worker 0 pushes 600 more (ahead by 600: within the lead), then 600 more (1200: beyond it).
  p.arrived(peerOf(0), push(2), 0, 600, &sent, t0);
  p.offer(ack(peerOf(0), 2), &sent, t0);
  CHECK(idsOf(sent) == std::vector<uint64_t>{2});
  sent.clear();
  p.arrived(peerOf(0), push(3), 0, 600, &sent, t0);
  p.offer(ack(peerOf(0), 3), &sent, t0);
  CHECK(sent.empty());
  CHECK(p.held() == 1);

  // Worker 1 catches up a little: worker 2 (600) is still the slowest, so 3 still waits.
  p.arrived(peerOf(1), push(2), 1, 600, &sent, t0 + milliseconds(10));
  CHECK(sent.empty());
  // Worker 2's push brings the slowest to 1200: worker 0 (1800) is within the lead again, and its
  // acknowledgement leaves with the arrival that allowed it, before worker 2's own is even offered.
  p.arrived(peerOf(2), push(2), 2, 600, &sent, t0 + milliseconds(20));
  CHECK(idsOf(sent) == std::vector<uint64_t>{3});
  sent.clear();
  p.offer(ack(peerOf(1), 2), &sent, t0 + milliseconds(20));
  p.offer(ack(peerOf(2), 2), &sent, t0 + milliseconds(20));
  CHECK(idsOf(sent) == std::vector<uint64_t>{2, 2});
  CHECK(p.expired() == 0);
}

TEST_CASE("push pacer: held acknowledgements leave by the deadline, and the excess is forgiven", "[push_pacer]") {
  PushPacer p(2, /*lead=*/100, milliseconds(100), milliseconds(50));
  const Clock::time_point t0 = Clock::now();
  std::vector<Outgoing> sent;
  p.arrived(peerOf(1), push(1), 1, 100, &sent, t0);
  p.offer(ack(peerOf(1), 1), &sent, t0);
  // Worker 0 pushes 500 while worker 1 (100) is active and behind: both acknowledgements wait, in order.
  p.arrived(peerOf(0), push(1), 0, 250, &sent, t0);
  p.arrived(peerOf(0), push(2), 0, 250, &sent, t0);
  p.offer(ack(peerOf(0), 1), &sent, t0);
  p.offer(ack(peerOf(0), 2), &sent, t0 + milliseconds(10));
  REQUIRE(idsOf(sent) == std::vector<uint64_t>{1});
  sent.clear();

  p.expire(t0 + milliseconds(40), &sent);  // not yet
  CHECK(sent.empty());
  p.expire(t0 + milliseconds(55), &sent);  // the first waited 55 ms: it leaves, and the excess is forgiven
  CHECK(idsOf(sent) == std::vector<uint64_t>{1, 2});
  CHECK(p.expired() == 1);
  CHECK(p.pushedBytes(0) == 200);  // worker 1's 100 plus the lead
  sent.clear();

  // Forgiven, worker 0 is within the lead, and its next push is acknowledged at once.
  p.arrived(peerOf(1), push(2), 1, 100, &sent, t0 + milliseconds(60));
  p.arrived(peerOf(0), push(3), 0, 100, &sent, t0 + milliseconds(60));
  p.offer(ack(peerOf(0), 3), &sent, t0 + milliseconds(60));
  CHECK(idsOf(sent) == std::vector<uint64_t>{3});
}

TEST_CASE("push pacer: a resend counts again, and a worker ahead waits even for a round only it misses",
          "[push_pacer]") {
  PushPacer p(2, /*lead=*/100, milliseconds(100), milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  std::vector<Outgoing> sent;
  p.arrived(peerOf(0), push(1), 0, 500, &sent, t0);
  p.arrived(peerOf(1), push(1), 1, 10, &sent, t0);
  p.offer(ack(peerOf(1), 1), &sent, t0);
  // Worker 1 pushed key 9, which worker 0 has not; worker 0 is 490 bytes ahead, so it waits anyway:
  // the pacer counts bytes, not rounds (holding it holds round 9 too, for the deadline at most).
  p.arrived(peerOf(1), push(9), 1, 10, &sent, t0);
  p.offer(ack(peerOf(1), 9), &sent, t0);
  p.offer(ack(peerOf(0), 1), &sent, t0);
  CHECK(idsOf(sent) == std::vector<uint64_t>{1, 9});
  // A resend of worker 1's key 9 (a new request id) counts its bytes again, and brings worker 0 within the lead.
  sent.clear();
  p.arrived(peerOf(1), push(9, 10), 1, 400, &sent, t0 + milliseconds(10));
  CHECK(idsOf(sent) == std::vector<uint64_t>{1});
  CHECK(p.pushedBytes(1) == 420);
}

TEST_CASE("push pacer: a worker that stopped pushing is not waited for", "[push_pacer]") {
  PushPacer p(2, /*lead=*/100, /*active=*/milliseconds(100), milliseconds(100));
  const Clock::time_point t0 = Clock::now();
  std::vector<Outgoing> sent;
  p.arrived(peerOf(1), push(1), 1, 100, &sent, t0);
  p.offer(ack(peerOf(1), 1), &sent, t0);
  sent.clear();
  // Worker 1 last pushed at t0; 150 ms later it computes (or is done), and worker 0 pushes alone.
  const Clock::time_point later = t0 + milliseconds(150);
  for (uint64_t id = 1; id <= 5; ++id) {
    p.arrived(peerOf(0), push(id), 0, 1000, &sent, later);
    p.offer(ack(peerOf(0), id), &sent, later);
  }
  CHECK(idsOf(sent) == std::vector<uint64_t>{1, 2, 3, 4, 5});
  CHECK(p.held() == 0);
}

TEST_CASE("push pacer: errors, unannounced answers and a pacer that is off never wait", "[push_pacer]") {
  const Clock::time_point t0 = Clock::now();
  std::vector<Outgoing> sent;
  SECTION("an error answer to a push of a worker far ahead leaves at once") {
    PushPacer p(2, 100, milliseconds(100), milliseconds(100));
    p.arrived(peerOf(1), push(1), 1, 10, &sent, t0);
    p.arrived(peerOf(0), push(1), 0, 5000, &sent, t0);
    p.offer(ack(peerOf(0), 1, pb::CMD_ERROR), &sent, t0);
    CHECK(idsOf(sent) == std::vector<uint64_t>{1});
    // A pull's answer (never announced) on the same connection leaves too.
    p.offer(ack(peerOf(0), 9), &sent, t0);
    CHECK(idsOf(sent) == std::vector<uint64_t>{1, 9});
    CHECK(p.held() == 0);
  }
  SECTION("lead 0 is off: arrivals are not counted and nothing waits") {
    PushPacer p(2, 0);
    CHECK_FALSE(p.enabled());
    p.arrived(peerOf(1), push(1), 1, 10, &sent, t0);
    p.arrived(peerOf(0), push(1), 0, 5000, &sent, t0);
    p.offer(ack(peerOf(0), 1), &sent, t0);
    CHECK(idsOf(sent) == std::vector<uint64_t>{1});
    CHECK(p.pushedBytes(0) == 0);
  }
  SECTION("a worker index out of range is ignored") {
    PushPacer p(2, 100);
    p.arrived(peerOf(5), push(1), 5, 5000, &sent, t0);
    p.arrived(peerOf(5), push(2), -1, 5000, &sent, t0);
    p.offer(ack(peerOf(5), 1), &sent, t0);
    CHECK(idsOf(sent) == std::vector<uint64_t>{1});
  }
}

TEST_CASE("push pacer: offerAll keeps the order of what leaves, and a new generation starts over", "[push_pacer]") {
  PushPacer p(2, 100, milliseconds(1000), milliseconds(1000));
  std::vector<Outgoing> sent;
  const Clock::time_point now = Clock::now();
  p.arrived(peerOf(1), push(1), 1, 10, &sent, now);
  p.arrived(peerOf(0), push(1), 0, 500, &sent, now);  // ahead by 490
  std::vector<Outgoing> answers{ack(peerOf(0), 7), ack(peerOf(0), 1), ack(peerOf(1), 1)};
  p.offerAll(&answers);
  CHECK(idsOf(answers) == std::vector<uint64_t>{7, 1});  // worker 0's acknowledgement 1 waits
  CHECK(p.held() == 1);

  p.clear();
  CHECK(p.pushedBytes(0) == 0);
  p.expire(now + std::chrono::seconds(5), &sent);
  CHECK(sent.empty());  // what waited went with the old generation's connections
  p.arrived(peerOf(0), push(2), 0, 500, &sent, now);
  p.offer(ack(peerOf(0), 2), &sent, now);
  CHECK(idsOf(sent) == std::vector<uint64_t>{2});
}

}  // namespace
}  // namespace zps
