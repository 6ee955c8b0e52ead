// Tests for the server's reply window (ZPS_REPLY_WINDOW_BYTES, ps/server/reply_window.h): answers to
// ordered pulls leave by priority, at most a window of unacknowledged bytes per connection, and a
// window never stays closed (acknowledgements, the deadline, a new generation).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ps/server/reply_window.h"

namespace zps {
namespace {

using Clock = ReplyWindow::Clock;

Outgoing answer(PeerId peer, uint64_t request_id, size_t bytes, pb::DataCommand command = pb::CMD_REPLY) {
  Outgoing o;
  o.peer = peer;
  o.header.set_command(command);
  o.header.set_request_id(request_id);
  o.payload = Blob::fromString(std::string(bytes, 'x'));
  return o;
}

std::vector<uint64_t> idsOf(const std::vector<Outgoing>& sent) {
  std::vector<uint64_t> ids;
  for (const Outgoing& o : sent) ids.push_back(o.header.request_id());
  return ids;
}

TEST_CASE("reply window: answers leave while they fit, then by priority as acknowledgements come", "[reply_window]") {
  ReplyWindow w;
  const PeerId peer = 7;
  // Pulls 1-5 of 100 bytes each, a window of 250 bytes: lower priority numbers are more urgent.
  const int64_t priority_of[] = {0, 50, 40, 30, 5, 10};
  for (uint64_t id = 1; id <= 5; ++id) w.expect(peer, id, priority_of[id], 250);

  std::vector<Outgoing> sent;
  // Rounds complete in the order 1, 2, 3, 4, 5; 1 and 2 fit, the rest wait.
  for (uint64_t id = 1; id <= 5; ++id) w.offer(answer(peer, id, 100), &sent);
  REQUIRE(idsOf(sent) == std::vector<uint64_t>{1, 2});
  for (const Outgoing& o : sent) CHECK(o.header.wants_received());
  CHECK(w.unacknowledgedBytes(peer) == 200);
  CHECK(w.held() == 3);

  // Each acknowledgement lets the most urgent waiting answer go: 4 (5), then 5 (10), then 3 (30).
  sent.clear();
  w.received(peer, std::vector<uint64_t>{1}, &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{4});
  sent.clear();
  w.received(peer, std::vector<uint64_t>{2, 4}, &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{5, 3});
  CHECK(w.unacknowledgedBytes(peer) == 200);
  sent.clear();
  w.received(peer, std::vector<uint64_t>{5, 3}, &sent);
  CHECK(sent.empty());
  CHECK(w.unacknowledgedBytes(peer) == 0);
}

TEST_CASE("reply window: other answers pass through, and an answer larger than the window goes alone",
          "[reply_window]") {
  ReplyWindow w;
  std::vector<Outgoing> sent;
  // No ordered pull was announced: a push's acknowledgement, an unordered pull's sum, another peer's.
  w.offer(answer(1, 10, 0), &sent);
  w.offer(answer(1, 11, 500), &sent);
  w.expect(2, 12, 0, 100);
  w.offer(answer(1, 12, 500), &sent);  // same id, other connection
  REQUIRE(idsOf(sent) == std::vector<uint64_t>{10, 11, 12});
  for (const Outgoing& o : sent) CHECK_FALSE(o.header.wants_received());

  // Nothing unacknowledged: an answer of 500 bytes goes through a window of 100, alone.
  sent.clear();
  w.expect(1, 20, 0, 100);
  w.expect(1, 21, 0, 100);
  w.offer(answer(1, 20, 500), &sent);
  w.offer(answer(1, 21, 10), &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{20});
  // An error answers an ordered pull at once and holds no window.
  w.expect(1, 22, 0, 100);
  sent.clear();
  w.offer(answer(1, 22, 0, pb::CMD_ERROR), &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{22});
  CHECK_FALSE(sent[0].header.wants_received());
}

TEST_CASE("reply window: offerAll keeps what leaves now, in order, and nothing else", "[reply_window]") {
  ReplyWindow w;
  std::vector<Outgoing> answers;
  answers.push_back(answer(1, 1, 100));
  w.offerAll(&answers);  // nothing announced yet: every answer leaves
  CHECK(idsOf(answers) == std::vector<uint64_t>{1});
  for (uint64_t id : {2, 3}) w.expect(1, id, 0, 100);
  answers.clear();
  for (uint64_t id : {2, 3, 4}) answers.push_back(answer(1, id, 100));
  w.offerAll(&answers);  // 2 fills the window, 3 waits, 4 was never announced
  CHECK(idsOf(answers) == std::vector<uint64_t>{2, 4});
}

TEST_CASE("reply window: unknown, repeated and foreign acknowledgements change nothing", "[reply_window]") {
  ReplyWindow w;
  std::vector<Outgoing> sent;
  for (uint64_t id : {1, 2}) w.expect(3, id, 0, 100);
  w.offer(answer(3, 1, 100), &sent);
  w.offer(answer(3, 2, 100), &sent);
  REQUIRE(idsOf(sent) == std::vector<uint64_t>{1});
  sent.clear();
  w.received(3, std::vector<uint64_t>{99, 2}, &sent);  // 2 is waiting, not sent: not acknowledged yet
  w.received(4, std::vector<uint64_t>{1}, &sent);      // another connection's
  CHECK(sent.empty());
  CHECK(w.unacknowledgedBytes(3) == 100);
  w.received(3, std::vector<uint64_t>{1, 1}, &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{2});
  CHECK(w.unacknowledgedBytes(3) == 100);
}

TEST_CASE("reply window: an answer unacknowledged past the deadline counts as received", "[reply_window]") {
  ReplyWindow w(std::chrono::milliseconds(500));
  std::vector<Outgoing> sent;
  for (uint64_t id : {1, 2}) w.expect(5, id, 0, 100);
  const Clock::time_point t0 = Clock::now();
  w.offer(answer(5, 1, 100), &sent);
  w.offer(answer(5, 2, 100), &sent);
  REQUIRE(idsOf(sent) == std::vector<uint64_t>{1});
  sent.clear();
  w.expire(t0 + std::chrono::milliseconds(100), &sent);
  CHECK(sent.empty());
  w.expire(t0 + std::chrono::seconds(2), &sent);
  CHECK(idsOf(sent) == std::vector<uint64_t>{2});
  // Once nothing is announced, waiting or unacknowledged, the connection is forgotten.
  sent.clear();
  w.expire(t0 + std::chrono::seconds(4), &sent);
  CHECK(sent.empty());
  CHECK(w.unacknowledgedBytes(5) == 0);
  w.offer(answer(5, 3, 100), &sent);  // not announced: passes through
  CHECK(idsOf(sent) == std::vector<uint64_t>{3});
}

TEST_CASE("reply window: a new generation forgets what was announced and what waits", "[reply_window]") {
  ReplyWindow w;
  std::vector<Outgoing> sent;
  for (uint64_t id : {1, 2}) w.expect(9, id, 0, 100);
  w.offer(answer(9, 1, 100), &sent);
  w.clear();
  sent.clear();
  w.offer(answer(9, 2, 100), &sent);  // announced before the clear: passes through now
  CHECK(idsOf(sent) == std::vector<uint64_t>{2});
  CHECK(w.unacknowledgedBytes(9) == 0);
}

TEST_CASE("reply window: a connection announces at most kMaxExpected pulls", "[reply_window]") {
  ReplyWindow w;
  for (uint64_t id = 1; id <= ReplyWindow::kMaxExpected + 10; ++id) w.expect(1, id, 0, 1);
  std::vector<Outgoing> sent;
  w.offer(answer(1, 1, 10), &sent);                              // announced: holds the window
  w.offer(answer(1, 2, 10), &sent);                              // announced: waits
  w.offer(answer(1, ReplyWindow::kMaxExpected + 5, 10), &sent);  // beyond the bound: passes through
  CHECK(idsOf(sent) == std::vector<uint64_t>{1, ReplyWindow::kMaxExpected + 5});
}

}  // namespace
}  // namespace zps
