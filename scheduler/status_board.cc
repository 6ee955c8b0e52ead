#include "scheduler/status_board.h"

#include <glog/logging.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "ps/node/observability.h"

namespace zps {
namespace {

constexpr size_t kMaxLossPoints = 2000;
const char* const kStates[] = {"alive", "late", "dead", "finished", "missing", "registered"};

std::string roleText(pb::Role r) { return r == pb::SERVER ? "server" : r == pb::WORKER ? "worker" : "scheduler"; }

std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

// Peer numbers summed: a hostile server must not wrap a total around.
uint64_t addSaturated(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

// A table name as one line of text: control bytes (a peer's) shown as '?'.
std::string printable(const std::string& name) {
  std::string out = name;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return out;
}

// One table's sizes as a JSON object, for a server's tables and for the totals over servers.
std::string tableJson(const std::string& name, uint64_t rows, uint64_t bytes, uint64_t created, uint64_t evicted) {
  return "{\"name\":\"" + jsonEscape(name) + "\",\"rows\":" + std::to_string(rows) +
         ",\"bytes\":" + std::to_string(bytes) + ",\"created\":" + std::to_string(created) +
         ",\"evicted\":" + std::to_string(evicted) + "}";
}

std::string fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

}  // namespace

StatusBoard::StatusBoard(int num_servers, int num_workers, std::chrono::milliseconds heartbeat_interval,
                         std::chrono::milliseconds heartbeat_timeout)
    : num_servers_(num_servers),
      num_workers_(num_workers),
      interval_(heartbeat_interval),
      timeout_(heartbeat_timeout) {}

void StatusBoard::heartbeat(uint64_t peer, const pb::Heartbeat& hb) {
  auto now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  Progress& p = progress_[peer];
  if (p.last_rate_at != Clock::time_point{}) {
    double dt = std::chrono::duration<double>(now - p.last_rate_at).count();
    if (dt > 0) {
      // Counters only grow; a smaller value is a restarted node, whose rate starts over.
      p.push_rate = hb.bytes_pushed() >= p.bytes_pushed ? (hb.bytes_pushed() - p.bytes_pushed) / dt : 0;
      p.pull_rate = hb.bytes_pulled() >= p.bytes_pulled ? (hb.bytes_pulled() - p.bytes_pulled) / dt : 0;
    }
  }
  p.last_rate_at = now;
  p.round = hb.round();
  p.bytes_pushed = hb.bytes_pushed();
  p.bytes_pulled = hb.bytes_pulled();
  p.tables.assign(hb.tables().begin(), hb.tables().end());
  p.tables_left_out = hb.tables_left_out();
  p.table_budget_bytes = hb.table_budget_bytes();
  if (hb.has_progress()) {
    bool new_step = !p.has_progress || hb.step() != p.step;
    p.has_progress = true;
    p.step = hb.step();
    p.loss = hb.loss();
    p.samples_per_sec = hb.samples_per_sec();
    p.epoch = hb.epoch();
    p.epochs = hb.epochs();
    if (new_step && std::isfinite(hb.loss())) {
      p.loss_history.emplace_back(hb.step(), hb.loss());
      if (p.loss_history.size() > kMaxLossPoints) {
        // Keep the curve's whole span at half the resolution rather than only its recent end.
        std::deque<std::pair<uint64_t, double>> thinned;
        for (size_t i = 0; i < p.loss_history.size(); i += 2) thinned.push_back(p.loss_history[i]);
        p.loss_history.swap(thinned);
      }
    }
  }
}

void StatusBoard::publish(std::vector<Member> members, bool running) {
  std::lock_guard<std::mutex> lock(mu_);
  members_ = std::move(members);
  running_ = running;
  if (running && job_state_ == "rendezvous") job_state_ = "running";
}

void StatusBoard::nodeDead(uint64_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  dead_[peer] = true;
}

void StatusBoard::jobEnded(int exit_code, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  job_state_ = exit_code == 0 ? "completed" : "failed";
  job_reason_ = reason;
}

void StatusBoard::recovering(bool on, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (job_state_ == "completed" || job_state_ == "failed") return;
  job_state_ = on ? "recovering" : "running";
  job_reason_ = on ? reason : "";
}

std::string StatusBoard::epochOf(const Progress* p) {
  if (p == nullptr || !p->has_progress || p->epochs == 0) return "";
  return std::to_string(p->epoch) + "/" + std::to_string(p->epochs);
}

std::vector<StatusBoard::Row> StatusBoard::rowsLocked() const {
  auto now = Clock::now();
  std::vector<Row> rows;
  std::map<pb::Role, std::set<int>> taken;
  std::map<pb::Role, int> count;
  for (const auto& m : members_) {
    Row r;
    r.role = roleText(m.role);
    r.rank = m.rank;
    r.host = m.host;
    r.hostname = m.hostname;
    r.pid = m.pid;
    r.heartbeat_age_s = std::chrono::duration<double>(now - m.last_seen).count();
    auto d = dead_.find(m.peer);
    if (m.finished)
      r.state = "finished";
    else if (d != dead_.end())
      r.state = "dead";
    else if (r.heartbeat_age_s * 1000 > 2.0 * static_cast<double>(interval_.count()))
      r.state = "late";
    else
      r.state = running_ ? "alive" : "registered";
    auto p = progress_.find(m.peer);
    r.progress = p == progress_.end() ? nullptr : &p->second;
    rows.push_back(r);
    if (m.rank >= 0) taken[m.role].insert(m.rank);
    ++count[m.role];
  }
  // Nodes not registered yet: name the lowest free ranks (a node asking for arrival order may take any).
  for (auto [role, expected] : {std::pair{pb::SERVER, num_servers_}, std::pair{pb::WORKER, num_workers_}}) {
    int missing = expected - count[role];
    for (int rank = 0; rank < expected && missing > 0; ++rank) {
      if (taken[role].count(rank) != 0) continue;
      rows.push_back(Row{roleText(role), rank, "", "", 0, "missing", -1, nullptr});
      --missing;
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.role != b.role ? a.role < b.role : a.rank < b.rank; });
  return rows;
}

bool StatusBoard::healthyLocked(const std::vector<Row>& rows) const {
  if (job_state_ == "failed") return false;
  for (const auto& r : rows)
    if (r.state == "missing" || r.state == "dead" || r.state == "late") return false;
  return true;
}

bool StatusBoard::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return healthyLocked(rowsLocked());
}

std::map<std::string, std::map<std::string, int>> StatusBoard::countsByRoleAndState() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, std::map<std::string, int>> out;
  for (const auto& r : rowsLocked()) ++out[r.role][r.state];
  return out;
}

std::map<std::string, StatusBoard::TableTotal> StatusBoard::tableTotals(const std::vector<Row>& rows) {
  std::map<std::string, TableTotal> totals;
  for (const auto& r : rows) {
    if (r.role != "server" || r.progress == nullptr) continue;
    for (const auto& t : r.progress->tables) {
      TableTotal& total = totals[t.name()];
      total.rows = addSaturated(total.rows, t.rows());
      total.bytes = addSaturated(total.bytes, t.bytes());
      total.created = addSaturated(total.created, t.created());
      total.evicted = addSaturated(total.evicted, t.evicted());
      total.server_rows.emplace_back(r.rank, t.rows());
    }
  }
  return totals;
}

std::string StatusBoard::tablesText(const std::vector<Row>& rows) {
  const auto totals = tableTotals(rows);
  if (totals.empty()) return "";
  // Each server's rows fit a line for a few servers; more make the totals the whole story.
  constexpr size_t kServersShown = 8;
  char line[512];
  std::snprintf(line, sizeof(line), "%-24s %12s %14s %12s %12s  %s\n", "TABLE", "ROWS", "BYTES", "CREATED", "EVICTED",
                "ROWS PER SERVER");
  std::string out = line;
  for (const auto& [name, t] : totals) {
    std::string per_server;
    if (t.server_rows.size() <= kServersShown)
      for (const auto& [rank, n] : t.server_rows)
        per_server += (per_server.empty() ? "" : ", ") + ("s" + std::to_string(rank)) + " " + std::to_string(n);
    std::snprintf(line, sizeof(line), "%-24s %12llu %14llu %12llu %12llu  ", printable(name).c_str(),
                  static_cast<unsigned long long>(t.rows), static_cast<unsigned long long>(t.bytes),
                  static_cast<unsigned long long>(t.created), static_cast<unsigned long long>(t.evicted));
    out += line + per_server + "\n";
  }
  for (const auto& r : rows) {
    const Progress* p = r.progress;
    if (r.role != "server" || p == nullptr) continue;
    if (p->tables_left_out > 0)
      out += "server " + std::to_string(r.rank) + " holds " + std::to_string(p->tables_left_out) +
             " more smaller tables (not shown)\n";
    if (p->table_budget_bytes == 0) continue;
    uint64_t held = 0;
    for (const auto& t : p->tables) held = addSaturated(held, t.bytes());
    out += "server " + std::to_string(r.rank) + " table budget: " + std::to_string(held) + " of " +
           std::to_string(p->table_budget_bytes) + " bytes held (ZPS_TABLE_MEMORY_BYTES)\n";
  }
  return out;
}

std::string StatusBoard::json() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = rowsLocked();
  std::string out = "{\"job\":{\"state\":\"" + job_state_ + "\",\"reason\":\"" + jsonEscape(job_reason_) +
                    "\",\"servers\":" + std::to_string(num_servers_) + ",\"workers\":" + std::to_string(num_workers_) +
                    ",\"uptime_s\":" + num(std::chrono::duration<double>(Clock::now() - start_).count()) +
                    ",\"heartbeat_interval_s\":" + num(interval_.count() / 1000.0) +
                    ",\"heartbeat_timeout_s\":" + num(timeout_.count() / 1000.0) +
                    ",\"now_unix_ms\":" + std::to_string(unixMicros() / 1000) +
                    "},\"healthy\":" + (healthyLocked(rows) ? "true" : "false") + ",\"nodes\":[";
  bool first = true;
  for (const auto& r : rows) {
    if (!first) out += ",";
    first = false;
    out += "{\"role\":\"" + r.role + "\",\"rank\":" + std::to_string(r.rank) + ",\"host\":\"" + jsonEscape(r.host) +
           "\",\"hostname\":\"" + jsonEscape(r.hostname) + "\",\"pid\":" + std::to_string(r.pid) + ",\"state\":\"" +
           r.state + "\",\"heartbeat_age_s\":" + (r.heartbeat_age_s < 0 ? "null" : num(r.heartbeat_age_s));
    if (const Progress* p = r.progress) {
      out += ",\"round\":" + std::to_string(p->round) + ",\"bytes_pushed\":" + std::to_string(p->bytes_pushed) +
             ",\"bytes_pulled\":" + std::to_string(p->bytes_pulled) + ",\"push_bytes_per_s\":" + num(p->push_rate) +
             ",\"pull_bytes_per_s\":" + num(p->pull_rate);
      if (p->has_progress) {
        if (p->epochs > 0) out += ",\"epoch\":" + std::to_string(p->epoch) + ",\"epochs\":" + std::to_string(p->epochs);
        out += ",\"step\":" + std::to_string(p->step) + ",\"loss\":" + num(p->loss) +
               ",\"samples_per_s\":" + num(p->samples_per_sec) + ",\"loss_history\":[";
        for (size_t i = 0; i < p->loss_history.size(); ++i) {
          if (i) out += ",";
          out += "[" + std::to_string(p->loss_history[i].first) + "," + num(p->loss_history[i].second) + "]";
        }
        out += "]";
      }
      if (r.role == "server") {
        out += ",\"table_budget_bytes\":" + std::to_string(p->table_budget_bytes) +
               ",\"tables_left_out\":" + std::to_string(p->tables_left_out) + ",\"tables\":[";
        for (size_t i = 0; i < p->tables.size(); ++i) {
          const auto& t = p->tables[i];
          out += std::string(i ? "," : "") + tableJson(t.name(), t.rows(), t.bytes(), t.created(), t.evicted());
        }
        out += "]";
      }
    }
    out += "}";
  }
  // Every table summed over the servers.
  out += "],\"tables\":[";
  bool first_table = true;
  for (const auto& [name, t] : tableTotals(rows)) {
    out += std::string(first_table ? "" : ",") + tableJson(name, t.rows, t.bytes, t.created, t.evicted);
    first_table = false;
  }
  return out + "]}";
}

std::string StatusBoard::text(bool* healthy) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = rowsLocked();
  bool ok = healthyLocked(rows);
  if (healthy != nullptr) *healthy = ok;
  std::string out = "zps job " + job_state_ + ": " + std::to_string(num_servers_) + " servers, " +
                    std::to_string(num_workers_) + " workers, up " +
                    fixed(std::chrono::duration<double>(Clock::now() - start_).count(), 1) + " s, " +
                    (ok ? "healthy" : "NOT healthy") + "\n";
  if (!job_reason_.empty()) out += "reason: " + job_reason_ + "\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%-7s %4s  %-22s %8s  %-8s %10s %8s %9s %8s %10s %10s %10s %10s\n", "ROLE", "RANK",
                "HOST", "PID", "STATE", "HEARTBEAT", "ROUND", "EPOCH", "STEP", "LOSS", "SAMPLES/S", "PUSH MB/s",
                "PULL MB/s");
  out += line;
  for (const auto& r : rows) {
    std::string hb = r.heartbeat_age_s < 0 ? "-" : fixed(r.heartbeat_age_s, 1) + "s ago";
    const Progress* p = r.progress;
    std::string round = p ? std::to_string(p->round) : "-";
    std::string epoch = epochOf(p);
    if (epoch.empty()) epoch = "-";
    std::string step = p && p->has_progress ? std::to_string(p->step) : "-";
    std::string loss = p && p->has_progress ? num(p->loss) : "-";
    std::string sps = p && p->has_progress ? fixed(p->samples_per_sec, 0) : "-";
    std::string push = p ? fixed(p->push_rate / 1e6, 2) : "-";
    std::string pull = p ? fixed(p->pull_rate / 1e6, 2) : "-";
    std::string host = r.host.empty() ? "-" : r.host;
    if (!r.hostname.empty() && r.hostname != r.host) host += " (" + r.hostname + ")";
    std::snprintf(line, sizeof(line), "%-7s %4d  %-22s %8s  %-8s %10s %8s %9s %8s %10s %10s %10s %10s\n",
                  r.role.c_str(), r.rank, host.substr(0, 22).c_str(), r.pid ? std::to_string(r.pid).c_str() : "-",
                  r.state.c_str(), hb.c_str(), round.c_str(), epoch.substr(0, 9).c_str(), step.c_str(), loss.c_str(),
                  sps.c_str(), push.c_str(), pull.c_str());
    out += line;
  }
  out += tablesText(rows);
  for (const auto& r : rows) {
    if (r.state == "missing") out += r.role + " " + std::to_string(r.rank) + " is missing (not registered)\n";
    if (r.state == "dead")
      out += r.role + " " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) + ") is dead\n";
    if (r.state == "late")
      out += r.role + " " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) +
             ") sent no heartbeat for " + fixed(r.heartbeat_age_s, 1) + " s; it is declared dead after " +
             fixed(timeout_.count() / 1000.0, 0) + " s\n";
  }
  return out;
}

std::string StatusBoard::summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = rowsLocked();
  std::string out = job_state_ + " " + fixed(std::chrono::duration<double>(Clock::now() - start_).count(), 0) + "s";
  std::vector<std::string> steps;
  int missing = 0;
  double samples = 0, push = 0, pull = 0;
  bool any_samples = false;
  for (const auto& r : rows) {
    if (r.state == "missing") ++missing;
    if (r.role != "worker") continue;
    const Progress* p = r.progress;
    const std::string epoch = epochOf(p);
    std::string s = p == nullptr ? (r.state == "missing" ? "missing" : "-")
                    : p->has_progress
                        ? (epoch.empty() ? "" : "epoch " + epoch + " ") + "step " + std::to_string(p->step)
                        : "round " + std::to_string(p->round);
    if (p != nullptr && (r.state == "dead" || r.state == "late")) s = r.state + " " + s;
    steps.push_back("w" + std::to_string(r.rank) + " " + s);
    // A finished or dead worker's last rates are stale: they no longer count towards the job's.
    if (p != nullptr && r.state != "finished" && r.state != "dead") {
      if (p->has_progress) {
        samples += p->samples_per_sec;
        any_samples = true;
      }
      push += p->push_rate;
      pull += p->pull_rate;
    }
  }
  if (missing > 0) out += " | waiting for " + std::to_string(missing) + (missing == 1 ? " node" : " nodes");
  // Many workers do not fit on one line: show the first few and count the rest.
  constexpr size_t kShown = 4;
  for (size_t i = 0; i < steps.size() && i < kShown; ++i) out += (i == 0 ? " | " : ", ") + steps[i];
  if (steps.size() > kShown) out += ", +" + std::to_string(steps.size() - kShown) + " more";
  if (any_samples) out += " | " + fixed(samples, 0) + " samples/s";
  out += " | push " + fixed(push / 1e6, 2) + " MB/s, pull " + fixed(pull / 1e6, 2) + " MB/s";
  return out;
}

// ---- SchedulerObserver ----

SchedulerObserver::SchedulerObserver(int num_servers, int num_workers, std::chrono::milliseconds heartbeat_interval,
                                     std::chrono::milliseconds heartbeat_timeout, std::atomic<uint64_t>* malformed)
    : board_(num_servers, num_workers, heartbeat_interval, heartbeat_timeout) {
  auto& m = metrics::metrics();
  dead_nodes_ = &m.counter("zps_dead_nodes_total", "Nodes declared dead (no heartbeat for ZPS_HEARTBEAT_TIMEOUT)");
  m.callback("zps_malformed_messages_total", "Malformed or unexpected messages dropped", true, {},
             [malformed] { return static_cast<double>(malformed->load()); });
  for (const char* role : {"server", "worker"}) {
    for (const char* state : kStates) {
      m.callback("zps_scheduler_nodes", "Nodes by role and state as the scheduler sees them", false,
                 {{"role", role}, {"state", state}}, [this, role = std::string(role), state = std::string(state)] {
                   auto counts = board_.countsByRoleAndState();
                   return static_cast<double>(counts[role][state]);
                 });
    }
  }
  m.callback("zps_scheduler_healthy", "1 when every node is registered and alive (zps status exits 0)", false, {},
             [this] { return board_.healthy() ? 1.0 : 0.0; });
}

SchedulerObserver::~SchedulerObserver() {
  if (http_) http_->stop();
  for (const char* name : {"zps_malformed_messages_total", "zps_scheduler_nodes", "zps_scheduler_healthy"})
    metrics::metrics().removeCallbacks(name);
}

Status SchedulerObserver::start(std::function<bool(const std::string&)> token_check) {
  ZPS_ASSIGN_OR_RETURN(
      http_, startMetricsEndpoint("scheduler", 0, [this, &token_check](HttpServer& http) {
        // Scrapers and probes need no secret; the node table (hosts, pids) and the dashboard do.
        if (token_check) http.requireToken(std::move(token_check), {"/metrics", "/healthz"});
        http.get("/api/status", [this](const HttpServer::Query&) {
          return HttpServer::Response{200, "application/json", board_.json()};
        });
        http.get("/api/summary", [this](const HttpServer::Query&) {
          return HttpServer::Response{200, "text/plain; charset=utf-8", board_.summary()};
        });
        // Probe-friendly: 200 when healthy, 503 otherwise, with the table as the body.
        http.get("/status", [this](const HttpServer::Query&) {
          bool ok = false;
          std::string body = board_.text(&ok);
          return HttpServer::Response{ok ? 200 : 503, "text/plain; charset=utf-8", body};
        });
        http.get("/healthz", [this](const HttpServer::Query&) {
          bool ok = board_.healthy();
          return HttpServer::Response{ok ? 200 : 503, "text/plain; charset=utf-8", ok ? "ok\n" : "not healthy\n"};
        });
        http.get("/", [](const HttpServer::Query&) {
          return HttpServer::Response{200, "text/html; charset=utf-8", dashboardHtml()};
        });
      }));
  return Status::OK();
}

void SchedulerObserver::publish(std::vector<StatusBoard::Member> members, bool running, bool force) {
  auto now = StatusBoard::Clock::now();
  if (!force && now < next_publish_) return;
  next_publish_ = now + std::chrono::milliseconds(200);
  board_.publish(std::move(members), running);
}

void SchedulerObserver::nodeDead(uint64_t peer) {
  dead_nodes_->inc();
  board_.nodeDead(peer);
}

}  // namespace zps
