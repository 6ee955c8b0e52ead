// Tests for the scheduler's barrier table (scheduler/barrier_table.cc): a barrier releases only
// when every member has arrived once, and duplicated, replayed or early messages never release it.
#include <cstdint>

#include <catch2/catch.hpp>

#include "scheduler/barrier_table.h"

namespace zps {
namespace {

using Result = BarrierTable::Result;

TEST_CASE("barrier table: releases only when every member arrived", "[barrier]") {
  BarrierTable t;
  CHECK(t.generation(pb::GROUP_WORKERS) == 0);
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 3) == Result::kWaiting);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 1);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 1, 3) == Result::kWaiting);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 2);
  CHECK(t.generation(pb::GROUP_WORKERS) == 0);
  CHECK(t.arrive(pb::GROUP_WORKERS, 3, 1, 3) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_WORKERS) == 1);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 0);
}

TEST_CASE("barrier table: a group of one releases at once", "[barrier]") {
  BarrierTable t;
  for (uint64_t seq = 1; seq <= 5; ++seq) CHECK(t.arrive(pb::GROUP_SERVERS, 9, seq, 1) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_SERVERS) == 5);
}

TEST_CASE("barrier table: a duplicate arrival does not release", "[barrier]") {
  BarrierTable t;
  CHECK(t.arrive(pb::GROUP_ALL, 1, 1, 3) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_ALL, 2, 1, 3) == Result::kWaiting);
  // Member 2 sends its barrier again: it must not count as the third member.
  CHECK(t.arrive(pb::GROUP_ALL, 2, 1, 3) == Result::kDuplicate);
  CHECK(t.generation(pb::GROUP_ALL) == 0);
  CHECK(t.waiting(pb::GROUP_ALL) == 2);
  CHECK(t.arrive(pb::GROUP_ALL, 1, 1, 3) == Result::kDuplicate);
  CHECK(t.generation(pb::GROUP_ALL) == 0);
  CHECK(t.arrive(pb::GROUP_ALL, 3, 1, 3) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_ALL) == 1);
}

TEST_CASE("barrier table: stale and ahead sequences are ignored", "[barrier]") {
  BarrierTable t;
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 0, 2) == Result::kStale);  // sequences start at 1
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 2, 2) == Result::kAhead);
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, UINT64_MAX, 2) == Result::kAhead);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 0);
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 2) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 1, 2) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_WORKERS) == 1);

  // A replay of barrier 1 after its release must not count toward barrier 2.
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 2) == Result::kStale);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 1, 2) == Result::kStale);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 0);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 3, 2) == Result::kAhead);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 0);
  CHECK(t.generation(pb::GROUP_WORKERS) == 1);

  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 2, 2) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 2) == Result::kStale);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 2, 2) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_WORKERS) == 2);
}

TEST_CASE("barrier table: generations count releases", "[barrier]") {
  BarrierTable t;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    INFO("barrier " << seq);
    CHECK(t.arrive(pb::GROUP_ALL, 30, seq, 4) == Result::kWaiting);
    CHECK(t.arrive(pb::GROUP_ALL, 10, seq, 4) == Result::kWaiting);
    CHECK(t.arrive(pb::GROUP_ALL, 40, seq, 4) == Result::kWaiting);
    CHECK(t.generation(pb::GROUP_ALL) == seq - 1);
    CHECK(t.arrive(pb::GROUP_ALL, 20, seq, 4) == Result::kReleased);
    CHECK(t.generation(pb::GROUP_ALL) == seq);
  }
}

TEST_CASE("barrier table: groups are independent", "[barrier]") {
  BarrierTable t;
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 2) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_SERVERS, 1, 1, 2) == Result::kWaiting);  // same peer, other group
  CHECK(t.arrive(pb::GROUP_ALL, 1, 1, 3) == Result::kWaiting);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 1);
  CHECK(t.waiting(pb::GROUP_SERVERS) == 1);
  CHECK(t.waiting(pb::GROUP_ALL) == 1);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 1, 2) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_WORKERS) == 1);
  CHECK(t.generation(pb::GROUP_SERVERS) == 0);
  CHECK(t.generation(pb::GROUP_ALL) == 0);
  CHECK(t.waiting(pb::GROUP_SERVERS) == 1);
  CHECK(t.waiting(pb::GROUP_ALL) == 1);
  // The workers' second barrier does not disturb the other groups.
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 2, 2) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_SERVERS, 3, 1, 2) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_SERVERS) == 1);
  CHECK(t.generation(pb::GROUP_WORKERS) == 1);
  CHECK(t.arrive(pb::GROUP_ALL, 2, 1, 3) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_ALL, 3, 1, 3) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_ALL) == 1);
  CHECK(t.waiting(pb::GROUP_WORKERS) == 1);
}

TEST_CASE("barrier table: a restarted scheduler resumes the count the nodes report", "[barrier]") {
  BarrierTable t;
  t.restore(pb::GROUP_WORKERS, 7);  // some node saw barrier 7 released
  CHECK(t.generation(pb::GROUP_WORKERS) == 7);
  // A node that missed release 7 sends barrier 7 again: stale (the scheduler then tells it again).
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 7, 2) == Result::kStale);
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 8, 2) == Result::kWaiting);
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 8, 2) == Result::kReleased);
  CHECK(t.generation(pb::GROUP_WORKERS) == 8);
}

TEST_CASE("barrier table: a node that registered again from a new connection keeps its arrival", "[barrier]") {
  BarrierTable t;
  CHECK(t.arrive(pb::GROUP_WORKERS, 1, 1, 2) == Result::kWaiting);
  t.rebind(1, 5);
  CHECK(t.arrive(pb::GROUP_WORKERS, 5, 1, 2) == Result::kDuplicate);  // counted once
  CHECK(t.arrive(pb::GROUP_WORKERS, 2, 1, 2) == Result::kReleased);
}

}  // namespace
}  // namespace zps
