// Tests for ReceivedRounds (worker/received_rounds.h): which rounds a worker tells the servers it is
// done with, so they can free those results.
#include <catch2/catch.hpp>

#include "worker/received_rounds.h"

namespace zps {
namespace {

TEST_CASE("received rounds: push-pulls answered in order move through() along", "[received_rounds]") {
  ReceivedRounds r;
  CHECK(r.through() == 0);
  for (uint64_t round = 1; round <= 3; ++round) {
    r.done(round, true, true);
    CHECK(r.through() == round);
  }
}

TEST_CASE("received rounds: a round counts only when both its push and its pull were answered", "[received_rounds]") {
  ReceivedRounds r;
  // A worker pushes rounds 1-3 ahead (pipelining) before pulling round 1: it may still pull 1, 2, 3.
  r.done(1, true, false);
  r.done(2, true, false);
  r.done(3, true, false);
  CHECK(r.through() == 0);
  r.done(1, false, true);
  CHECK(r.through() == 1);
  // A pull answered before its push (the push's reply was lost and is being resent) does not count.
  r.done(4, false, true);
  r.done(2, false, true);
  r.done(3, false, true);
  CHECK(r.through() == 3);
  r.done(4, true, false);
  CHECK(r.through() == 4);
}

TEST_CASE("received rounds: a round answered out of order waits for the rounds before it", "[received_rounds]") {
  ReceivedRounds r;
  r.done(2, true, true);
  r.done(3, true, true);
  CHECK(r.through() == 0);  // round 1 timed out and may be resent
  r.done(1, true, true);
  CHECK(r.through() == 3);
  r.done(2, true, true);  // a duplicate answer changes nothing
  CHECK(r.through() == 3);
}

}  // namespace
}  // namespace zps
