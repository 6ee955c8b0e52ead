#include "ps/node/observability.h"

#include "ps/server/sum_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace zps {
namespace {

std::mutex g_config_mu;
std::optional<ObsConfig> g_config;

const char* opName(int command) {
  switch (command) {
    case pb::CMD_PUSH: return "push";
    case pb::CMD_PULL: return "pull";
    case pb::CMD_PUSH_PULL: return "push_pull";
    case pb::CMD_PUSH_ROWS: return "push_rows";
    case pb::CMD_PULL_ROWS: return "pull_rows";
    default: return "other";
  }
}
bool isPush(int c) { return c == pb::CMD_PUSH || c == pb::CMD_PUSH_PULL || c == pb::CMD_PUSH_ROWS; }
bool isPull(int c) { return c == pb::CMD_PULL || c == pb::CMD_PUSH_PULL || c == pb::CMD_PULL_ROWS; }
int latencySlot(int c) { return c == pb::CMD_PUSH || c == pb::CMD_PUSH_ROWS ? 0 : c == pb::CMD_PUSH_PULL ? 2 : 1; }

void registerNodeInfo(const std::string& role, int rank) {
  metrics::metrics().gauge("zps_node_info", "Always 1; labels say which node this endpoint belongs to",
                           {{"role", role}, {"rank", std::to_string(rank)}}).set(1);
}

}  // namespace

StatusOr<ObsConfig> loadObsConfig(const EnvLookup& env) {
  ObsConfig c;
  ZPS_ASSIGN_OR_RETURN(long long port, readInteger(env, "metrics_port"));
  c.metrics_port = static_cast<int>(port);
  ZPS_ASSIGN_OR_RETURN(c.metrics_host, readText(env, "metrics_host"));
  if (c.metrics_host.empty()) return InvalidArgument("ZPS_METRICS_HOST is empty; set it to an address such as 0.0.0.0");
  ZPS_ASSIGN_OR_RETURN(c.trace_on, readSwitch(env, "trace_on"));
  ZPS_ASSIGN_OR_RETURN(long long start, readInteger(env, "trace_start_step"));
  ZPS_ASSIGN_OR_RETURN(long long end, readInteger(env, "trace_end_step"));
  if (end < start)
    return InvalidArgument("ZPS_TRACE_END_STEP (" + std::to_string(end) + ") is before ZPS_TRACE_START_STEP (" +
                           std::to_string(start) + "); set it to a later step");
  c.trace_start_step = static_cast<uint64_t>(start);
  c.trace_end_step = static_cast<uint64_t>(end);
  ZPS_ASSIGN_OR_RETURN(c.trace_dir, readText(env, "trace_dir"));
  if (c.trace_dir.empty()) return InvalidArgument("ZPS_TRACE_DIR is empty; set it to a folder");
  return c;
}

Status initObservability(const EnvLookup& env) {
  std::lock_guard<std::mutex> lock(g_config_mu);
  if (g_config) return Status::OK();
  ZPS_ASSIGN_OR_RETURN(ObsConfig c, loadObsConfig(env));
  g_config = c;
  return Status::OK();
}

const ObsConfig& obsConfig() {
  std::lock_guard<std::mutex> lock(g_config_mu);
  static const ObsConfig kDefault;
  return g_config ? *g_config : kDefault;
}

int64_t unixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c >= 0x7f) {
      // Peer text may be any bytes; escaping everything outside ASCII keeps the JSON valid UTF-8.
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// ---- Tracer ----

Tracer& Tracer::get() {
  static Tracer* tracer = new Tracer();  // never destroyed: any thread may add events during exit
  return *tracer;
}

void Tracer::configure(const ObsConfig& config, const std::string& role, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  on_ = config.trace_on;
  start_ = config.trace_start_step;
  end_ = config.trace_end_step;
  role_ = role;
  rank_ = rank;
  path_ = config.trace_dir + "/" + role + "-" + std::to_string(rank) + ".json";
}

void Tracer::complete(const std::string& name, const std::string& cat, int64_t ts_us, int64_t dur_us, uint64_t tid,
                      const std::string& args) {
  // One event per partition and round; the cap bounds memory if someone traces a huge window.
  constexpr size_t kMaxEvents = 2'000'000;
  std::string e = "{\"name\":\"" + jsonEscape(name) + "\",\"cat\":\"" + cat + "\",\"ph\":\"X\",\"ts\":" +
                  std::to_string(ts_us) + ",\"dur\":" + std::to_string(std::max<int64_t>(dur_us, 0)) +
                  ",\"pid\":0,\"tid\":" + std::to_string(tid) + ",\"args\":{" + args + "}}";
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() < kMaxEvents) events_.push_back(std::move(e));
}

void Tracer::nameTrack(uint64_t tid, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  tracks_.emplace(tid, name);
}

void Tracer::clockSample(int64_t sent_us, int64_t scheduler_us, int64_t received_us) {
  int64_t rtt = received_us - sent_us;
  if (rtt < 0 || scheduler_us <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (best_rtt_us_ >= 0 && rtt >= best_rtt_us_) return;
  best_rtt_us_ = rtt;
  offset_us_ = scheduler_us - (sent_us + received_us) / 2;
}

Status Tracer::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_ || flushed_) return Status::OK();
  flushed_ = true;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
  std::string tmp = path_ + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  if (!out) return Unavailable("cannot write trace file " + tmp + " (ZPS_TRACE_DIR)");
  std::string process = role_ + " " + std::to_string(rank_);
  out << "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"role\":\"" << role_ << "\",\"rank\":" << rank_
      << ",\"clock_offset_us\":" << offset_us_ << ",\"clock_rtt_us\":" << best_rtt_us_
      << ",\"start_step\":" << start_ << ",\"end_step\":" << end_ << "},\n\"traceEvents\":[\n";
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"" << process << "\"}}";
  for (const auto& [tid, name] : tracks_)
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << tid << ",\"args\":{\"name\":\""
        << jsonEscape(name) << "\"}}";
  for (const auto& e : events_) out << ",\n" << e;
  out << "\n]}\n";
  out.close();
  if (!out) return Unavailable("cannot write trace file " + tmp);
  std::filesystem::rename(tmp, path_, ec);
  if (ec) return Unavailable("cannot rename " + tmp + ": " + ec.message());
  LOG(INFO) << process << ": wrote " << events_.size() << " trace events to " << path_;
  events_.clear();
  return Status::OK();
}

// ---- HTTP endpoint ----

StatusOr<std::unique_ptr<HttpServer>> startMetricsEndpoint(const std::string& role, int rank,
                                                           const std::function<void(HttpServer&)>& more,
                                                           int port_offset) {
  const ObsConfig& c = obsConfig();
  if (c.metrics_port == 0) return std::unique_ptr<HttpServer>();
  registerNodeInfo(role, rank);
  auto http = std::make_unique<HttpServer>();
  http->get("/metrics", [](const HttpServer::Query&) {
    HttpServer::Response r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics::metrics().exposition();
    return r;
  });
  if (more) more(*http);
  ZPS_RETURN_IF_ERROR(http->start(c.metrics_host, std::min(c.metrics_port + port_offset, 65535), "ZPS_METRICS_PORT"));
  LOG(INFO) << role << (rank >= 0 ? " " + std::to_string(rank) : "") << ": metrics on http://" << c.metrics_host
            << ":" << http->port() << "/metrics";
  return http;
}

// ---- WorkerObserver ----

WorkerObserver::WorkerObserver(const Config& config) : config_(config) {
  auto& m = metrics::metrics();
  for (int s = 0; s < config.num_servers; ++s) {
    metrics::Labels l{{"server", std::to_string(s)}};
    PerServer p;
    p.pushed_bytes = &m.counter("zps_worker_pushed_bytes_total", "Tensor bytes this worker pushed, by server", l);
    p.push_messages = &m.counter("zps_worker_push_messages_total", "Push requests this worker sent, by server", l);
    p.pulled_bytes = &m.counter("zps_worker_pulled_bytes_total", "Tensor bytes this worker pulled, by server", l);
    p.pull_messages = &m.counter("zps_worker_pull_messages_total", "Pull requests answered, by server", l);
    p.pushed_rows = &m.counter("zps_worker_pushed_rows_total", "Embedding rows this worker pushed, by server", l);
    p.pulled_rows = &m.counter("zps_worker_pulled_rows_total", "Embedding rows this worker pulled, by server", l);
    p.failed = &m.counter("zps_worker_failed_requests_total", "Requests answered with an error, by server", l);
    const char* ops[3] = {"push", "pull", "push_pull"};
    for (int i = 0; i < 3; ++i) {
      p.latency[i] = &m.histogram("zps_worker_request_duration_seconds",
                                  "Time from sending a request to its reply, by server and operation",
                                  metrics::latencyBuckets(), {{"server", std::to_string(s)}, {"op", ops[i]}});
    }
    servers_.push_back(p);
  }
  m.callback("zps_worker_inflight_requests", "Requests sent and not yet answered", false, {}, [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<double>(inflight_.size());
  });
  m.callback("zps_worker_round", "Highest round (training step) this worker has issued", false, {},
             [this] { return static_cast<double>(max_round_.load()); });
  m.callback("zps_training_step", "Training step last reported by the program", false, {},
             [this] { return static_cast<double>(step_.load()); });
  m.callback("zps_training_epoch", "Training epoch in progress (1-based; 0 when the program has no epochs)", false,
             {}, [this] { return static_cast<double>(epoch_.load()); });
  m.callback("zps_training_loss", "Training loss last reported by the program", false, {},
             [this] { return has_progress_ ? loss_.load() : std::nan(""); });
  m.callback("zps_training_samples_per_second", "Training throughput last reported by the program", false, {},
             [this] { return sps_.load(); });
}

WorkerObserver::~WorkerObserver() {
  if (http_) http_->stop();
  for (const char* name : {"zps_worker_inflight_requests", "zps_worker_round", "zps_training_step", "zps_training_epoch",
                           "zps_training_loss", "zps_training_samples_per_second", "zps_checkpoint_age_seconds"})
    metrics::metrics().removeCallbacks(name);
  Status s = Tracer::get().flush();
  if (!s.ok()) LOG(WARNING) << "worker " << rank_ << ": " << s.message();
}

Status WorkerObserver::start(int rank) {
  rank_ = rank;
  const bool local = config_.local_size > 1;
  Tracer::get().configure(obsConfig(), local ? "worker-" + std::to_string(rank) + "-local" : "worker",
                          local ? config_.local_rank : rank);
  ZPS_ASSIGN_OR_RETURN(http_, startMetricsEndpoint("worker", rank, {}, local ? config_.local_rank : 0));
  return Status::OK();
}

void WorkerObserver::issued(uint64_t request_id, int command, int server, uint64_t key, uint64_t round, size_t bytes,
                            const std::string& tensor, size_t rows) {
  if (server < 0 || server >= static_cast<int>(servers_.size())) return;
  PerServer& p = servers_[server];
  if (isPush(command)) {
    p.pushed_bytes->inc(static_cast<double>(bytes));
    p.push_messages->inc();
    p.pushed_rows->inc(static_cast<double>(rows));
    bytes_pushed_ += bytes;
  }
  uint64_t seen = max_round_.load();
  while (round > seen && !max_round_.compare_exchange_weak(seen, round)) {
  }
  std::lock_guard<std::mutex> lock(mu_);
  inflight_[request_id] = InFlight{command, server, key, round, bytes, rows, unixMicros(),
                                   Tracer::get().enabled(round) ? tensor : std::string()};
}

void WorkerObserver::completed(uint64_t request_id, bool ok) {
  InFlight f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = inflight_.find(request_id);
    if (it == inflight_.end()) return;  // HELLO, DECLARE and checkpoints are not tracked
    f = std::move(it->second);
    inflight_.erase(it);
  }
  int64_t now = unixMicros();
  PerServer& p = servers_[f.server];
  if (!ok) {
    p.failed->inc();
    return;
  }
  p.latency[latencySlot(f.command)]->observe((now - f.start_us) / 1e6);
  if (isPull(f.command)) {
    // A successful reply carried exactly f.bytes: the worker checks the size before completing it.
    p.pull_messages->inc();
    p.pulled_bytes->inc(static_cast<double>(f.bytes));
    p.pulled_rows->inc(static_cast<double>(f.rows));
    bytes_pulled_ += f.bytes;
  }
  if (!f.tensor.empty() && Tracer::get().enabled(f.round)) {
    Tracer::get().nameTrack(f.key, f.tensor + " key " + std::to_string(f.key));
    Tracer::get().complete(opName(f.command), "worker", f.start_us, now - f.start_us, f.key,
                           "\"tensor\":\"" + jsonEscape(f.tensor) + "\",\"key\":" + std::to_string(f.key) +
                               ",\"round\":" + std::to_string(f.round) + ",\"bytes\":" + std::to_string(f.bytes) +
                               ",\"server\":" + std::to_string(f.server) + ",\"worker\":" + std::to_string(rank_));
  }
}

void WorkerObserver::progress(uint64_t step, double loss, double samples_per_sec, uint64_t epoch, uint64_t epochs) {
  step_ = step;
  epoch_ = epoch;
  epochs_ = epochs;
  loss_ = loss;
  sps_ = samples_per_sec;
  has_progress_ = true;
}

void WorkerObserver::checkpointed() {
  if (last_checkpoint_us_.exchange(unixMicros()) == 0) {
    metrics::metrics().callback("zps_checkpoint_age_seconds", "Seconds since the last checkpoint", false, {},
                                [this] { return (unixMicros() - last_checkpoint_us_.load()) / 1e6; });
  }
}

void WorkerObserver::fillHeartbeat(pb::Heartbeat* hb) {
  hb->set_round(max_round_.load());
  hb->set_bytes_pushed(bytes_pushed_.load());
  hb->set_bytes_pulled(bytes_pulled_.load());
  if (has_progress_) {
    hb->set_has_progress(true);
    hb->set_step(step_.load());
    hb->set_loss(loss_.load());
    hb->set_samples_per_sec(sps_.load());
    hb->set_epoch(epoch_.load());
    hb->set_epochs(epochs_.load());
  }
}

// ---- ServerObserver ----

ServerObserver::ServerObserver(const Config& config, std::atomic<uint64_t>* malformed) : config_(config) {
  auto& m = metrics::metrics();
  for (int w = 0; w < config.num_workers; ++w) {
    metrics::Labels l{{"worker", std::to_string(w)}};
    workers_.push_back(PerWorker{
        &m.counter("zps_server_pushed_bytes_total", "Tensor bytes received in pushes, by worker", l),
        &m.counter("zps_server_push_messages_total", "Push requests handled, by worker", l),
        &m.counter("zps_server_pull_messages_total", "Pull requests handled, by worker", l)});
  }
  pulled_bytes_ = &m.counter("zps_server_pulled_bytes_total", "Tensor bytes sent in pull replies");
  rounds_completed_ = &m.counter("zps_server_rounds_completed_total",
                                 "Key rounds completed: one key's pushes from every worker summed");
  sum_seconds_ = &m.histogram("zps_server_engine_task_duration_seconds",
                              "Time an engine thread spent on one push (the sum) or pull", metrics::latencyBuckets());
  if (malformed != nullptr)
    m.callback("zps_malformed_messages_total", "Malformed or unexpected messages dropped", true, {},
               [malformed] { return static_cast<double>(malformed->load()); });
}

ServerObserver::~ServerObserver() {
  ServerObserver* self = this;
  current_.compare_exchange_strong(self, nullptr);
  if (http_) http_->stop();
  metrics::metrics().removeCallbacks("zps_malformed_messages_total");
  metrics::metrics().removeCallbacks("zps_checkpoint_age_seconds");
  Status s = Tracer::get().flush();
  if (!s.ok()) LOG(WARNING) << "server " << rank_ << ": " << s.message();
}

Status ServerObserver::start(int rank) {
  rank_ = rank;
  Tracer::get().configure(obsConfig(), "server", rank);
  for (int i = 0; i < config_.server_engine_threads; ++i) {
    queue_depth_.push_back(&metrics::metrics().gauge("zps_server_engine_queue_depth",
                                                     "Messages waiting for an engine thread",
                                                     {{"engine", std::to_string(i)}}));
    Tracer::get().nameTrack(static_cast<uint64_t>(i), "engine " + std::to_string(i));
  }
  current_ = this;
  ZPS_ASSIGN_OR_RETURN(http_, startMetricsEndpoint("server", rank));
  return Status::OK();
}

void ServerObserver::queueDepth(int engine, size_t depth) {
  if (engine >= 0 && engine < static_cast<int>(queue_depth_.size())) queue_depth_[engine]->set(static_cast<double>(depth));
}

void ServerObserver::handled(int engine, int worker, const pb::DataHeader& h, size_t payload_bytes, int64_t start_us,
                             size_t reply_bytes, size_t replies) {
  int64_t now = unixMicros();
  int command = h.command();
  if (command == pb::CMD_CHECKPOINT) {
    if (last_checkpoint_us_.exchange(now) == 0)
      metrics::metrics().callback("zps_checkpoint_age_seconds", "Seconds since the last checkpoint", false, {},
                                  [this] { return (unixMicros() - last_checkpoint_us_.load()) / 1e6; });
    return;
  }
  if (!isPush(command) && !isPull(command)) return;
  sum_seconds_->observe((now - start_us) / 1e6);
  bool valid_worker = worker >= 0 && worker < static_cast<int>(workers_.size());
  if (isPush(command)) {
    bytes_in_ += payload_bytes;
    if (valid_worker) {
      workers_[worker].pushed_bytes->inc(static_cast<double>(payload_bytes));
      workers_[worker].push_messages->inc();
    }
    if (h.round() > 0 && valid_worker) {
      std::lock_guard<std::mutex> lock(mu_);
      auto& seen = round_seen_[{h.key(), h.round()}];
      seen.resize(workers_.size());
      if (!seen[worker]) {
        seen[worker] = true;
        if (std::count(seen.begin(), seen.end(), true) == static_cast<long>(seen.size())) {
          round_seen_.erase({h.key(), h.round()});
          rounds_completed_->inc();
          if (h.round() > max_round_) max_round_ = h.round();
        }
      }
    }
  }
  if (valid_worker && isPull(command)) workers_[worker].pull_messages->inc();
  // A push that completes a round also answers the pulls of other workers parked on it, so pull bytes
  // are counted when they leave, not per requesting worker.
  if (replies > 0) {
    bytes_out_ += reply_bytes;
    pulled_bytes_->inc(static_cast<double>(reply_bytes));
  }
  if (Tracer::get().enabled(h.round())) {
    const char* name = isPush(command) ? "sum" : "pull";
    Tracer::get().complete(name, "server", start_us, now - start_us, static_cast<uint64_t>(engine),
                           "\"key\":" + std::to_string(h.key()) + ",\"round\":" + std::to_string(h.round()) +
                               ",\"worker\":" + std::to_string(worker) + ",\"bytes\":" +
                               std::to_string(payload_bytes) + ",\"server\":" + std::to_string(rank_) +
                               ",\"op\":\"" + opName(command) + "\"");
  }
}

std::atomic<ServerObserver*> ServerObserver::current_{nullptr};

void ServerObserver::handled(int engine, int worker, const pb::DataHeader& h, size_t payload_bytes, int64_t start_us,
                             const std::vector<Outgoing>& out) {
  size_t reply_bytes = 0, replies = 0;
  for (const auto& o : out) {
    if (o.payload.size() == 0) continue;
    reply_bytes += o.payload.size();
    ++replies;
  }
  handled(engine, worker, h, payload_bytes, start_us, reply_bytes, replies);
}

void ServerObserver::fillHeartbeat(pb::Heartbeat* hb) {
  hb->set_round(max_round_.load());
  hb->set_bytes_pushed(bytes_in_.load());
  hb->set_bytes_pulled(bytes_out_.load());
}

}  // namespace zps
