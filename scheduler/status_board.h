// StatusBoard: the scheduler's view of the cluster for `zps status`, the dashboard and /healthz.
// SchedulerObserver wraps it with the scheduler's metrics and HTTP endpoint.
//
// Threads: the scheduler's thread writes (heartbeats, snapshots of membership, deaths, the end of the
// job); HTTP threads read and render. One mutex guards everything; rendering copies nothing big.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/node/http_server.h"
#include "ps/node/metrics.h"

namespace zps {

class StatusBoard {
 public:
  using Clock = std::chrono::steady_clock;

  // What the scheduler knows about one registered node.
  struct Member {
    uint64_t peer = 0;
    pb::Role role = pb::ROLE_UNSPECIFIED;
    int rank = -1;
    std::string host, hostname;
    uint32_t pid = 0;
    Clock::time_point last_seen;
    bool finished = false;
  };

  StatusBoard(int num_servers, int num_workers, std::chrono::milliseconds heartbeat_interval,
              std::chrono::milliseconds heartbeat_timeout);

  // Scheduler thread.
  void heartbeat(uint64_t peer, const pb::Heartbeat& hb);
  void publish(std::vector<Member> members, bool running);
  void nodeDead(uint64_t peer);
  void jobEnded(int exit_code, const std::string& reason);
  // ZPS_RECOVERY: the job shows "recovering" (with what was lost) while a rank is held open for a
  // replacement, and "running" again once the new generation's address book is out.
  void recovering(bool on, const std::string& reason);

  // Any thread. healthy: every expected node is registered, none dead or late (no heartbeat for more
  // than two intervals), and the job has not failed.
  std::string json() const;
  std::string text(bool* healthy) const;
  // One line for `zps launch`'s live status: the job state, each worker's epoch (for programs that train
  // in epochs) and step (or round, before the program reports progress), and the workers' summed
  // samples/s and push/pull bytes/s.
  std::string summary() const;
  bool healthy() const;
  // Nodes by state ("alive", "late", "dead", "finished", "missing", "registered") for the metrics.
  std::map<std::string, std::map<std::string, int>> countsByRoleAndState() const;

 private:
  struct Progress {
    uint64_t round = 0, step = 0, bytes_pushed = 0, bytes_pulled = 0;
    uint64_t epoch = 0, epochs = 0;  // epochs == 0: the program reports no epochs
    bool has_progress = false;
    double loss = 0, samples_per_sec = 0;
    double push_rate = 0, pull_rate = 0;  // bytes/s between the last two heartbeats
    Clock::time_point last_rate_at{};
    std::deque<std::pair<uint64_t, double>> loss_history;
    // Servers: their tables as the last heartbeat had them (bounded by the codec).
    std::vector<pb::TableSize> tables;
    uint64_t tables_left_out = 0, table_budget_bytes = 0;
  };
  struct Row {
    std::string role;
    int rank;
    std::string host, hostname;
    uint32_t pid;
    std::string state;
    double heartbeat_age_s;  // < 0: never
    const Progress* progress;
  };
  std::vector<Row> rowsLocked() const;
  // Every table's sizes summed over the servers, with each server's rows (by rank).
  struct TableTotal {
    uint64_t rows = 0, bytes = 0, created = 0, evicted = 0;
    std::vector<std::pair<int, uint64_t>> server_rows;
  };
  static std::map<std::string, TableTotal> tableTotals(const std::vector<Row>& rows);
  // The table section of text(): one line per table, then the budget; empty without tables.
  static std::string tablesText(const std::vector<Row>& rows);
  // "3/10" for a worker in its third of ten epochs; empty when its program reports no epochs.
  static std::string epochOf(const Progress* p);
  bool healthyLocked(const std::vector<Row>& rows) const;

  const int num_servers_, num_workers_;
  const std::chrono::milliseconds interval_, timeout_;
  const Clock::time_point start_ = Clock::now();
  mutable std::mutex mu_;
  std::vector<Member> members_;
  bool running_ = false;
  std::map<uint64_t, Progress> progress_;
  std::map<uint64_t, bool> dead_;
  std::string job_state_ = "rendezvous";
  std::string job_reason_;
};

// The scheduler's observer: the board, the scheduler's metrics and, with ZPS_METRICS_PORT, the HTTP
// endpoint (/metrics, /api/status, /api/summary, /status, /healthz and the dashboard at /). Owned by the scheduler;
// the HTTP endpoint is stopped in the destructor, before the board goes away.
class SchedulerObserver {
 public:
  SchedulerObserver(int num_servers, int num_workers, std::chrono::milliseconds heartbeat_interval,
                    std::chrono::milliseconds heartbeat_timeout, std::atomic<uint64_t>* malformed);
  ~SchedulerObserver();
  // token_check set: every HTTP path but /metrics and /healthz needs the job's token.
  Status start(std::function<bool(const std::string&)> token_check);
  StatusBoard& board() { return board_; }
  void heartbeat(uint64_t peer, const pb::Heartbeat& hb) { board_.heartbeat(peer, hb); }
  // Rate-limited snapshot of membership (the scheduler calls it every loop turn).
  void publish(std::vector<StatusBoard::Member> members, bool running, bool force = false);
  void nodeDead(uint64_t peer);
  void jobEnded(int exit_code, const std::string& reason) { board_.jobEnded(exit_code, reason); }
  void recovering(bool on, const std::string& reason) { board_.recovering(on, reason); }

 private:
  StatusBoard board_;
  metrics::Counter* dead_nodes_;
  StatusBoard::Clock::time_point next_publish_{};
  std::unique_ptr<HttpServer> http_;
};

// The dashboard page (scheduler/dashboard/index.html, embedded at build time by scheduler/embed_dashboard.cmake).
const std::string& dashboardHtml();

}  // namespace zps
