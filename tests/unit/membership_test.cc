// Tests for scheduler membership (scheduler/membership.cc): requested ranks are honoured exactly,
// arrival-order nodes get the lowest free ranks, and every refusal says why.
#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "scheduler/membership.h"

namespace zps {
namespace {

pb::Register reg(pb::Role role, int requested_rank, const std::string& host = "10.0.0.1", int pid = 100) {
  pb::Register r;
  r.set_role(role);
  r.set_requested_rank(requested_rank);
  r.set_rank_source(requested_rank >= 0 ? "DMLC_WORKER_ID" : "arrival order");
  r.set_host(host);
  r.set_port(role == pb::SERVER ? 9100 : 0);
  r.set_hostname("node-" + host);
  r.set_pid(pid);
  return r;
}

// rank of every member by peer id.
std::map<PeerId, int> ranks(const Membership& m) {
  std::map<PeerId, int> out;
  for (const auto& member : m.members()) out[member.peer] = member.rank;
  return out;
}

TEST_CASE("membership: requested ranks given in reverse order are kept", "[membership]") {
  Membership m(1, 4);
  for (int r = 3; r >= 0; --r) REQUIRE(m.add(PeerId(10 + r), reg(pb::WORKER, r)).ok());
  CHECK_FALSE(m.complete());
  REQUIRE(m.add(50, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  auto got = ranks(m);
  for (int r = 0; r < 4; ++r) CHECK(got[PeerId(10 + r)] == r);
  CHECK(got[50] == 0);
  CHECK(m.find(12)->rank == 2);
  CHECK(m.find(12)->rank_source == "DMLC_WORKER_ID");
  CHECK(m.find(999) == nullptr);
}

TEST_CASE("membership: arrival-order nodes get the lowest free ranks in order", "[membership]") {
  Membership m(3, 3);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(3, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(4, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.add(5, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.add(6, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  auto got = ranks(m);
  CHECK(got[1] == 0);
  CHECK(got[2] == 1);
  CHECK(got[3] == 2);
  CHECK(got[4] == 0);
  CHECK(got[5] == 1);
  CHECK(got[6] == 2);
}

TEST_CASE("membership: mixed ranked and arrival-order nodes", "[membership]") {
  Membership m(1, 5);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());  // arrives first but rank 0 is asked for later
  REQUIRE(m.add(2, reg(pb::WORKER, 3)).ok());
  REQUIRE(m.add(3, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(4, reg(pb::WORKER, 0)).ok());
  REQUIRE(m.add(5, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(6, reg(pb::SERVER, 0)).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  auto got = ranks(m);
  CHECK(got[2] == 3);
  CHECK(got[4] == 0);
  CHECK(got[1] == 1);  // lowest free ranks (1, 2, 4) in arrival order
  CHECK(got[3] == 2);
  CHECK(got[5] == 4);
  CHECK(got[6] == 0);
  std::set<int> all;
  for (const auto& member : m.members())
    if (member.role == pb::WORKER) all.insert(member.rank);
  CHECK(all == std::set<int>{0, 1, 2, 3, 4});
}

TEST_CASE("membership: a duplicate rank is refused naming the holder", "[membership]") {
  Membership m(1, 3);
  REQUIRE(m.add(1, reg(pb::WORKER, 1, "10.0.0.5", 4321)).ok());
  Status s = m.add(2, reg(pb::WORKER, 1, "10.0.0.6", 999));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("worker rank 1"));
  CHECK_THAT(s.message(), Catch::Contains("DMLC_WORKER_ID"));
  CHECK_THAT(s.message(), Catch::Contains("already taken by worker 1 (10.0.0.5:0, pid 4321"));
  CHECK(m.registered(pb::WORKER) == 1);
  CHECK(m.find(2) == nullptr);
  // The same rank for the other role is fine.
  CHECK(m.add(3, reg(pb::SERVER, 0)).ok());
}

TEST_CASE("membership: the same connection cannot register twice", "[membership]") {
  Membership m(1, 2);
  REQUIRE(m.add(7, reg(pb::WORKER, -1)).ok());
  Status s = m.add(7, reg(pb::WORKER, -1));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("already registered"));
  CHECK(m.registered(pb::WORKER) == 1);
}

TEST_CASE("membership: a node that registers again from a new connection keeps its rank", "[membership]") {
  Membership m(1, 2);
  REQUIRE(m.add(7, reg(pb::WORKER, 1)).ok());
  m.rebind(7, 9, "nonce");
  CHECK(m.find(7) == nullptr);
  REQUIRE(m.find(9) != nullptr);
  CHECK(m.find(9)->requested_rank == 1);
  CHECK(m.find(9)->auth_nonce == "nonce");
  CHECK(m.holder(pb::WORKER, 1)->peer == 9);
  CHECK(m.registered(pb::WORKER) == 1);
}

TEST_CASE("membership: an out-of-range rank is refused", "[membership]") {
  Membership m(2, 2);
  Status s = m.add(1, reg(pb::WORKER, 2));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("worker rank 2"));
  CHECK_THAT(s.message(), Catch::Contains("out of range"));
  CHECK_THAT(s.message(), Catch::Contains("2 workers, ranks 0..1"));
  Status s2 = m.add(2, reg(pb::SERVER, 5));
  REQUIRE_FALSE(s2.ok());
  CHECK_THAT(s2.message(), Catch::Contains("server rank 5"));
  CHECK_THAT(s2.message(), Catch::Contains("2 servers, ranks 0..1"));
  CHECK(m.members().empty());
  CHECK(m.add(3, reg(pb::WORKER, 1)).ok());
}

TEST_CASE("membership: too many nodes of a role are refused", "[membership]") {
  Membership m(1, 2);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, 1)).ok());
  Status s = m.add(3, reg(pb::WORKER, -1));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains("all 2 worker slots are taken"));
  CHECK_THAT(s.message(), Catch::Contains("DMLC_NUM_WORKER"));
  // A ranked latecomer whose rank nobody asked for is refused too: slot 0 is reserved for peer 1.
  Status s0 = m.add(4, reg(pb::WORKER, 0));
  REQUIRE_FALSE(s0.ok());
  CHECK_THAT(s0.message(), Catch::Contains("slots are taken"));
  REQUIRE(m.add(5, reg(pb::SERVER, -1)).ok());
  Status s2 = m.add(6, reg(pb::SERVER, -1));
  REQUIRE_FALSE(s2.ok());
  CHECK_THAT(s2.message(), Catch::Contains("all 1 server slots are taken"));
  CHECK_THAT(s2.message(), Catch::Contains("DMLC_NUM_SERVER"));
  CHECK(m.registered(pb::WORKER) == 2);
  CHECK(m.registered(pb::SERVER) == 1);
  CHECK(m.complete());
}

TEST_CASE("membership: remove() frees the slot and the rank for a replacement", "[membership]") {
  Membership m(1, 2);
  REQUIRE(m.add(1, reg(pb::WORKER, 0)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, 1)).ok());
  REQUIRE(m.add(3, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.complete());
  m.remove(2);
  CHECK_FALSE(m.complete());
  CHECK(m.find(2) == nullptr);
  CHECK(m.registered(pb::WORKER) == 1);
  m.remove(12345);  // unknown peers are ignored
  CHECK(m.members().size() == 2);
  REQUIRE(m.add(4, reg(pb::WORKER, 1, "10.0.0.9")).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  CHECK(m.find(4)->rank == 1);
  CHECK(m.find(4)->host == "10.0.0.9");
  CHECK(m.find(1)->rank == 0);
}

TEST_CASE("membership: an arrival-order replacement takes the freed rank", "[membership]") {
  Membership m(1, 3);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(3, reg(pb::WORKER, 2)).ok());
  m.remove(1);
  REQUIRE(m.add(4, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(5, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  CHECK(m.find(2)->rank == 0);
  CHECK(m.find(4)->rank == 1);
  CHECK(m.find(3)->rank == 2);
}

TEST_CASE("membership: after the job started, a replacement gets the lost node's rank and others keep theirs",
          "[membership]") {
  Membership m(2, 1);
  REQUIRE(m.add(1, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.add(3, reg(pb::WORKER, 0)).ok());
  m.assignRanks();
  REQUIRE(m.find(1)->rank == 0);
  m.remove(1);  // server 0 is lost; server 1 (arrival order) must not move to rank 0
  CHECK(m.holder(pb::SERVER, 1)->peer == 2);
  CHECK(m.holder(pb::SERVER, 0) == nullptr);
  // A node asking for the live server 1's rank is refused, naming it.
  Status taken = m.add(4, reg(pb::SERVER, 1));
  CHECK_THAT(taken.message(), Catch::Contains("server rank 1 (from DMLC_WORKER_ID) is already taken by server 1"));
  REQUIRE(m.add(5, reg(pb::SERVER, -1)).ok());
  REQUIRE(m.complete());
  m.assignRanks();
  CHECK(m.find(2)->rank == 1);
  CHECK(m.find(5)->rank == 0);
}

TEST_CASE("membership: report() names the missing ranks and counts", "[membership]") {
  Membership m(2, 3);
  REQUIRE(m.add(1, reg(pb::WORKER, 0, "10.0.0.1", 11)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, 2, "10.0.0.3", 33)).ok());
  REQUIRE(m.add(3, reg(pb::SERVER, 1, "10.0.1.1", 44)).ok());
  std::string r = m.report();
  CHECK_THAT(r, Catch::StartsWith("1/2 servers, 2/3 workers registered"));
  CHECK_THAT(r, Catch::Contains("missing: server rank 0, worker rank 1"));
  CHECK_THAT(r, !Catch::Contains("worker rank 0,"));
  CHECK_THAT(r, !Catch::Contains("worker rank 2"));
  CHECK_THAT(r, Catch::Contains("present: "));
  CHECK_THAT(r, Catch::Contains("10.0.0.3:0, pid 33"));
  CHECK_THAT(r, Catch::Contains("server 1 (10.0.1.1:9100, pid 44"));
}

TEST_CASE("membership: report() leaves the ranks arrival-order nodes will take", "[membership]") {
  Membership m(1, 4);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::WORKER, 2)).ok());
  std::string r = m.report();
  CHECK_THAT(r, Catch::StartsWith("0/1 servers, 2/4 workers registered"));
  // Rank 0 goes to the arrival-order worker; ranks 1 and 3 are still missing.
  CHECK_THAT(r, Catch::Contains("missing: server rank 0, worker rank 1, worker rank 3"));
}

TEST_CASE("membership: report() of a complete membership lists no missing node", "[membership]") {
  Membership m(1, 1);
  REQUIRE(m.add(1, reg(pb::WORKER, -1)).ok());
  REQUIRE(m.add(2, reg(pb::SERVER, -1)).ok());
  std::string r = m.report();
  CHECK_THAT(r, Catch::StartsWith("1/1 servers, 1/1 workers registered"));
  CHECK_THAT(r, !Catch::Contains("missing"));
  Membership empty(2, 2);
  CHECK(empty.report() ==
        "0/2 servers, 0/2 workers registered; missing: server rank 0, server rank 1, "
        "worker rank 0, worker rank 1");
}

TEST_CASE("membership: describe()", "[membership]") {
  Member m;
  m.role = pb::WORKER;
  m.requested_rank = 3;
  m.host = "10.1.2.3";
  m.port = 0;
  m.pid = 77;
  m.hostname = "job-worker-3";
  CHECK(m.describe() == "worker 3 (10.1.2.3:0, pid 77, host name job-worker-3)");
  m.rank = 1;
  CHECK(m.describe() == "worker 1 (10.1.2.3:0, pid 77, host name job-worker-3)");
  m.rank = -1;
  m.requested_rank = -1;
  m.hostname.clear();
  m.role = pb::SERVER;
  m.port = 9000;
  CHECK(m.describe() == "server (10.1.2.3:9000, pid 77)");
}

}  // namespace
TEST_CASE("membership: a server's data salt is kept for the address book, an oversized one refused", "[membership]") {
  Membership m(2, 1);
  pb::Register server = reg(pb::SERVER, 0);
  server.set_data_salt(std::string(16, 's'));
  REQUIRE(m.add(1, server).ok());
  CHECK(m.find(1)->data_salt == std::string(16, 's'));
  pb::Register oversized = reg(pb::SERVER, 1, "10.0.0.2");
  oversized.set_data_salt(std::string(Membership::kMaxDataSaltBytes + 1, 's'));
  Status refused = m.add(2, oversized);
  CHECK(refused.code() == StatusCode::kFailedPrecondition);
  CHECK(refused.message().find("data salt of 65 bytes") != std::string::npos);
  CHECK(m.find(2) == nullptr);
}

}  // namespace zps
