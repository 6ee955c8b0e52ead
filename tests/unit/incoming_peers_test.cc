#include "ps/transport/zmq/incoming_peers.h"

#include <catch2/catch.hpp>
#include <string>

namespace zps {

TEST_CASE("incoming peers are found by routing id and sent to by peer id", "[incoming_peers]") {
  IncomingPeers peers;
  CHECK_FALSE(peers.find("a").has_value());
  CHECK(peers.routingIdOf(7) == nullptr);
  peers.add("a", 7);
  REQUIRE(peers.find("a").has_value());
  CHECK(*peers.find("a") == 7);
  REQUIRE(peers.routingIdOf(7) != nullptr);
  CHECK(*peers.routingIdOf(7) == "a");
  CHECK_FALSE(peers.full());
}

TEST_CASE("a forgotten peer stays sendable until enough later forgets push it out", "[incoming_peers]") {
  IncomingPeers peers;
  peers.add("first", 1);
  CHECK_FALSE(peers.forget(1).has_value());
  CHECK_FALSE(peers.find("first").has_value());  // its next message makes a new peer
  REQUIRE(peers.routingIdOf(1) != nullptr);      // replies to what it sent before still go out
  peers.add("first", 2);                         // the same connection, now peer 2
  CHECK(*peers.find("first") == 2);
  CHECK_FALSE(peers.forget(99).has_value());  // not an incoming peer: nothing happens
  std::optional<PeerId> pushed_out;
  for (PeerId p = 100; p < 100 + IncomingPeers::kRecentlyForgotten; ++p) {
    peers.add("peer-" + std::to_string(p), p);
    std::optional<PeerId> out = peers.forget(p);
    if (out) {
      CHECK_FALSE(pushed_out.has_value());
      pushed_out = out;
    }
  }
  REQUIRE(pushed_out.has_value());
  CHECK(*pushed_out == 1);
  CHECK(peers.routingIdOf(1) == nullptr);
  CHECK(*peers.find("first") == 2);  // forgetting the old id left the new one alone
  CHECK(peers.routingIdOf(2) != nullptr);
}

}  // namespace zps
