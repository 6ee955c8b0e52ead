// Tests for the end of a job (scheduler/job_end.cc) and for rebuilding a running job from its nodes
// (scheduler/job_rebuild.cc): who is awaited, who is told again, which generation and barrier counts a
// restarted scheduler adopts.
#include <catch2/catch.hpp>

#include "scheduler/job_end.h"
#include "scheduler/job_rebuild.h"

namespace zps {
namespace {

pb::Register worker(int rank, int pid) {
  pb::Register r;
  r.set_role(pb::WORKER);
  r.set_requested_rank(rank);
  r.set_host("10.0.0.1");
  r.set_hostname("node");
  r.set_pid(static_cast<uint32_t>(pid));
  return r;
}

pb::Control control(const pb::Register& r) {
  pb::Control c;
  *c.mutable_register_() = r;
  return c;
}

TEST_CASE("JobEnd: acknowledgements and goodbyes end the wait, everything else is answered with the Shutdown") {
  Membership members(0, 2);
  REQUIRE(members.add(1, worker(0, 100)).ok());
  REQUIRE(members.add(2, worker(1, 200)).ok());
  members.assignRanks();
  JobEnd end(0, "job complete", {1, 2});
  CHECK(end.shutdown().shutdown().exit_code() == 0);
  CHECK(end.shutdown().shutdown().reason() == "job complete");

  pb::Control heartbeat;
  heartbeat.mutable_heartbeat();
  CHECK(end.answer(1, heartbeat, members));  // its Shutdown was lost: told again
  pb::Control ack;
  ack.mutable_shutdown_ack();
  CHECK_FALSE(end.answer(1, ack, members));
  CHECK_FALSE(end.acknowledged());
  CHECK(end.waitingFor(members) == "worker 1 (10.0.0.1:0, pid 200, host name node)");

  // Worker 1 registers again from a new connection (peer 7): told again, and awaited there.
  pb::Register again = worker(1, 200);
  again.set_rejoin(true);
  CHECK(end.answer(7, control(again), members));
  CHECK_FALSE(end.answer(2, ack, members));  // the old connection no longer counts
  CHECK_FALSE(end.acknowledged());
  CHECK_FALSE(end.answer(7, ack, members));
  CHECK(end.acknowledged());

  // A stranger that registers after the end is told too, and awaited by nobody.
  CHECK(end.answer(9, control(worker(1, 999)), members));
  CHECK(end.acknowledged());
}

TEST_CASE("JobRebuild: the newest generation wins, with the barrier counts of its nodes only") {
  JobRebuild rebuild;
  CHECK_FALSE(rebuild.active());
  pb::Register old_node = worker(0, 100);
  old_node.set_generation(0);
  for (uint64_t n : {0, 5, 0, 0}) old_node.add_barriers_released(n);
  CHECK(rebuild.note(old_node));
  CHECK(rebuild.generation() == 0);
  CHECK(rebuild.released(pb::GROUP_WORKERS) == 5);

  // A node that heard of a recovery reports the generation it recovers into, with no barrier counted.
  pb::Register recovering = worker(1, 200);
  recovering.set_generation(1);
  for (uint64_t n : {0, 0, 0, 0}) recovering.add_barriers_released(n);
  CHECK_FALSE(rebuild.note(recovering));
  CHECK(rebuild.generation() == 1);
  CHECK(rebuild.released(pb::GROUP_WORKERS) == 0);
  CHECK_FALSE(rebuild.note(old_node));  // an older generation's counts are not this one's
  CHECK(rebuild.released(pb::GROUP_WORKERS) == 0);

  pb::Register ahead = worker(1, 200);
  ahead.set_generation(1);
  for (uint64_t n : {0, 2, 0, 1}) ahead.add_barriers_released(n);
  rebuild.note(ahead);
  CHECK(rebuild.released(pb::GROUP_WORKERS) == 2);
  CHECK(rebuild.released(pb::GROUP_ALL) == 1);

  // A node registered afresh: it replaces a lost one, so the job goes on in a new generation.
  rebuild.noteNewcomer();
  CHECK(rebuild.generation() == 2);
  CHECK(rebuild.released(pb::GROUP_WORKERS) == 0);
}

}  // namespace
}  // namespace zps
