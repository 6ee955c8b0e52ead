// Tests for Sessions (server/sessions.h): which HELLO a server accepts, from the sessions bound so far,
// without a server or a network.
#include "server/sessions.h"

#include <catch2/catch.hpp>

namespace zps::server_role {
namespace {

HelloRequest worker(int rank, uint32_t local_rank = 0) {
  HelloRequest r;
  r.worker = rank;
  r.local_rank = local_rank;
  return r;
}

// Binds `peer` as `r` asks, which must be accepted.
Session& accept(Sessions& s, PeerId peer, const HelloRequest& r) {
  const HelloDecision d = s.decideHello(peer, r, 4);
  INFO(d.why);
  REQUIRE(d.accepted());
  return s.bind(peer, r, d);
}

TEST_CASE("sessions: a worker rank out of range is refused", "[sessions]") {
  Sessions s;
  CHECK(s.decideHello(1, worker(4), 4).why == "worker rank 4 is out of range");
  CHECK(s.decideHello(1, worker(-1), 4).why == "worker rank -1 is out of range");
  CHECK(s.decideHello(1, worker(3), 4).accepted());
  CHECK_FALSE(s.contains(1));  // deciding binds nothing
}

TEST_CASE("sessions: one connection per worker rank and local rank", "[sessions]") {
  Sessions s;
  accept(s, 1, worker(2, 0));
  CHECK(s.decideHello(2, worker(2, 0), 4).why == "worker rank 2 local rank 0 is already connected");
  CHECK(s.decideHello(1, worker(2, 0), 4).accepted());  // the same connection again (a resent HELLO)
  accept(s, 2, worker(2, 1));                           // another local rank of the node
  CHECK(s.localRankOf(2) == 1);
  CHECK(s.localRankOf(99) == 0);
  s.clear();
  CHECK(s.decideHello(2, worker(2, 0), 4).accepted());  // a new generation starts over
}

TEST_CASE("sessions: the move to ipc presents its connection's token, once", "[sessions]") {
  Sessions s;
  accept(s, 1, worker(0)).upgrade_token = 77;
  HelloRequest move = worker(0);
  move.upgrade_token = 77;
  HelloRequest wrong_rank = worker(1);
  wrong_rank.upgrade_token = 77;
  CHECK(s.decideHello(5, wrong_rank, 4).why == "unknown connection token");
  HelloRequest wrong_token = worker(0);
  wrong_token.upgrade_token = 78;
  CHECK(s.decideHello(5, wrong_token, 4).why == "unknown connection token");
  const HelloDecision d = s.decideHello(5, move, 4);
  REQUIRE(d.accepted());
  CHECK(d.moved_from == PeerId{1});
  s.bind(5, move, d);
  CHECK(s.find(1)->upgrade_token == 0);  // used up
  CHECK(s.decideHello(6, move, 4).why == "unknown connection token");
}

TEST_CASE("sessions: a push lane presents its connection's lane token, once", "[sessions]") {
  Sessions s;
  Session& first = accept(s, 1, worker(3, 1));
  first.lane_token = 55;
  first.upgrade_token = 66;
  HelloRequest lane = worker(3, 1);
  lane.lane_token = 55;
  CHECK_FALSE(s.decideHello(1, lane, 4).accepted());  // not on the connection itself
  HelloRequest other_local = worker(3, 0);
  other_local.lane_token = 55;
  CHECK_FALSE(s.decideHello(2, other_local, 4).accepted());
  HelloRequest both = lane;
  both.upgrade_token = 66;
  CHECK(s.decideHello(2, both, 4).why == "a HELLO may move a connection to ipc or open a lane, not both");
  const HelloDecision d = s.decideHello(2, lane, 4);
  REQUIRE(d.accepted());
  CHECK(d.lane_of == PeerId{1});
  Session& opened = s.bind(2, lane, d);
  CHECK(opened.lane_opened);  // a lane opens none of its own
  CHECK(s.find(1)->lane_opened);
  CHECK(s.find(1)->lane_token == 0);
  CHECK(s.decideHello(3, lane, 4).why ==
        "unknown lane token: no connection of worker 3 local rank 1 was given it, or it has opened its lane already");
}

}  // namespace
}  // namespace zps::server_role
