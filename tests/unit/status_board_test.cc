// Tests for the scheduler's one-line job summary (StatusBoard::summary), which `zps launch` shows as
// its live status line.
#include <catch2/catch.hpp>
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "scheduler/status_board.h"

namespace zps {
namespace {

StatusBoard::Member member(uint64_t peer, pb::Role role, int rank) {
  StatusBoard::Member m;
  m.peer = peer;
  m.role = role;
  m.rank = rank;
  m.host = "127.0.0.1";
  m.last_seen = StatusBoard::Clock::now();
  return m;
}

pb::Heartbeat progress(uint64_t step, double samples_per_sec) {
  pb::Heartbeat hb;
  hb.set_round(step);
  hb.set_has_progress(true);
  hb.set_step(step);
  hb.set_loss(0.5);
  hb.set_samples_per_sec(samples_per_sec);
  return hb;
}

TEST_CASE("status summary: waiting nodes, steps or rounds, summed samples/s", "[status_summary]") {
  StatusBoard board(1, 6, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish({member(1, pb::WORKER, 0), member(2, pb::WORKER, 1)}, false);
  board.heartbeat(1, progress(12, 1000));
  pb::Heartbeat no_progress;
  no_progress.set_round(3);
  board.heartbeat(2, no_progress);
  const std::string s = board.summary();
  INFO(s);
  CHECK(s.rfind("rendezvous ", 0) == 0);
  // One server and four workers have not registered.
  CHECK(s.find(" | waiting for 5 nodes | w0 step 12, w1 round 3, w2 missing, w3 missing, +2 more | "
               "1000 samples/s | push 0.00 MB/s, pull 0.00 MB/s") != std::string::npos);
}

TEST_CASE("status summary: a dead worker is named and its stale rate not counted", "[status_summary]") {
  StatusBoard board(1, 2, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish({member(1, pb::SERVER, 0), member(2, pb::WORKER, 0), member(3, pb::WORKER, 1)}, true);
  board.heartbeat(2, progress(40, 500));
  board.heartbeat(3, progress(41, 700));
  board.nodeDead(3);
  const std::string s = board.summary();
  INFO(s);
  CHECK(s.rfind("running ", 0) == 0);
  CHECK(s.find(" | w0 step 40, w1 dead step 41 | 500 samples/s | ") != std::string::npos);
}

TEST_CASE("status summary: a training job in epochs shows each worker's epoch and step", "[status_summary]") {
  StatusBoard board(1, 3, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish(
      {member(1, pb::SERVER, 0), member(2, pb::WORKER, 0), member(3, pb::WORKER, 1), member(4, pb::WORKER, 2)}, true);
  pb::Heartbeat third_of_ten = progress(120, 800);
  third_of_ten.set_epoch(3);
  third_of_ten.set_epochs(10);
  board.heartbeat(2, third_of_ten);
  pb::Heartbeat last = progress(400, 700);
  last.set_epoch(10);
  last.set_epochs(10);
  board.heartbeat(3, last);
  board.heartbeat(4, progress(7, 100));  // a program without epochs keeps showing steps only
  const std::string s = board.summary();
  INFO(s);
  CHECK(s.find(" | w0 epoch 3/10 step 120, w1 epoch 10/10 step 400, w2 step 7 | 1600 samples/s | ") !=
        std::string::npos);

  const std::string json = board.json();
  INFO(json);
  CHECK(json.find("\"epoch\":3,\"epochs\":10,\"step\":120,") != std::string::npos);
  CHECK(json.find("\"epoch\":10,\"epochs\":10,\"step\":400,") != std::string::npos);
  CHECK(json.find("\"step\":7,") != std::string::npos);
  CHECK(json.find("\"epochs\":0") == std::string::npos);  // absent, not 0, without epochs

  const std::string text = board.text(nullptr);
  INFO(text);
  CHECK(text.find(" EPOCH ") != std::string::npos);
  CHECK(std::regex_search(text, std::regex("\nworker +0 .* 3/10 +120 ")));
  CHECK(std::regex_search(text, std::regex("\nworker +2 .* - +7 ")));
}

TEST_CASE("status: a held rank shows the job recovering and unhealthy, then running again", "[status_summary]") {
  StatusBoard board(1, 2, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish({member(1, pb::SERVER, 0), member(2, pb::WORKER, 0), member(3, pb::WORKER, 1)}, true);
  REQUIRE(board.healthy());
  // What the scheduler does when it loses worker 1 under ZPS_RECOVERY: the member goes, the rank is held.
  board.publish({member(1, pb::SERVER, 0), member(2, pb::WORKER, 0)}, true);
  board.recovering(true, "generation 1: waiting for a replacement of worker 1");
  bool healthy = true;
  std::string text = board.text(&healthy);
  INFO(text);
  CHECK_FALSE(healthy);
  CHECK(text.find("zps job recovering") != std::string::npos);
  CHECK(text.find("waiting for a replacement of worker 1") != std::string::npos);
  CHECK(board.json().find("\"state\":\"recovering\"") != std::string::npos);
  CHECK(board.summary().rfind("recovering ", 0) == 0);

  board.publish({member(1, pb::SERVER, 0), member(2, pb::WORKER, 0), member(4, pb::WORKER, 1)}, true);
  board.recovering(false, "");
  CHECK(board.healthy());
  CHECK(board.summary().rfind("running ", 0) == 0);
  // A job that has ended keeps its final state.
  board.jobEnded(0, "");
  board.recovering(true, "late");
  CHECK(board.summary().rfind("completed ", 0) == 0);
}

}  // namespace
}  // namespace zps

namespace zps {
namespace {

pb::TableSize tableSize(const std::string& name, uint64_t rows, uint64_t row_bytes, uint64_t evicted) {
  pb::TableSize t;
  t.set_name(name);
  t.set_rows(rows);
  t.set_bytes(rows * row_bytes);
  t.set_created(rows + evicted);
  t.set_evicted(evicted);
  return t;
}

TEST_CASE("status tables: each table summed over the servers, with each server's rows and budget", "[status_tables]") {
  StatusBoard board(2, 1, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish({member(1, pb::SERVER, 0), member(2, pb::SERVER, 1), member(3, pb::WORKER, 0)}, true);
  pb::Heartbeat s0, s1;
  *s0.add_tables() = tableSize("ctr/emb", 493, 112, 7);
  *s0.add_tables() = tableSize("bad\nname", 1, 112, 0);  // a peer's name: one line all the same
  s0.set_table_budget_bytes(60000);
  *s1.add_tables() = tableSize("ctr/emb", 507, 112, 0);
  s1.set_tables_left_out(3);
  board.heartbeat(1, s0);
  board.heartbeat(2, s1);
  const std::string text = board.text(nullptr);
  INFO(text);
  CHECK(
      text.find("\nctr/emb                          1000         112000         1007            7  s0 493, s1 507\n") !=
      std::string::npos);
  CHECK(text.find("\nbad?name                            1            112            1            0  s0 1\n") !=
        std::string::npos);
  CHECK(text.find("\nserver 0 table budget: 55328 of 60000 bytes held (ZPS_TABLE_MEMORY_BYTES)\n") !=
        std::string::npos);
  CHECK(text.find("\nserver 1 holds 3 more smaller tables (not shown)\n") != std::string::npos);
  CHECK(text.find("server 1 table budget") == std::string::npos);  // none set there

  const std::string json = board.json();
  INFO(json);
  CHECK(json.find(R"(,"tables":[{"name":"bad\nname","rows":1,"bytes":112,"created":1,"evicted":0},)"
                  R"({"name":"ctr/emb","rows":1000,"bytes":112000,"created":1007,"evicted":7}]})") !=
        std::string::npos);
  CHECK(json.find(R"("table_budget_bytes":0,"tables_left_out":3,"tables":[{"name":"ctr/emb","rows":507,)") !=
        std::string::npos);
}

TEST_CASE("status tables: hostile counts saturate instead of wrapping around", "[status_tables]") {
  StatusBoard board(2, 0, std::chrono::milliseconds(1000), std::chrono::milliseconds(10000));
  board.publish({member(1, pb::SERVER, 0), member(2, pb::SERVER, 1)}, true);
  for (uint64_t peer : {1, 2}) {
    pb::Heartbeat hb;
    pb::TableSize* t = hb.add_tables();
    t->set_name("t");
    t->set_rows(UINT64_MAX - 1);
    t->set_bytes(UINT64_MAX);
    board.heartbeat(peer, hb);
  }
  const std::string json = board.json();
  INFO(json);
  CHECK(json.find(R"(,"tables":[{"name":"t","rows":18446744073709551615,"bytes":18446744073709551615,)") !=
        std::string::npos);
}

}  // namespace
}  // namespace zps
