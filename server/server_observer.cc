#include "server/server_observer.h"

#include <glog/logging.h>

#include "ps/wire/codec.h"
#include "server/sum_store.h"
#include "server/table_sizes.h"

namespace zps {

// ---- ServerObserver ----

ServerObserver::ServerObserver(const Config& config, std::atomic<uint64_t>* malformed) : config_(config) {
  auto& m = metrics::metrics();
  for (int w = 0; w < config.num_workers; ++w) {
    metrics::Labels l{{"worker", std::to_string(w)}};
    workers_.push_back(
        PerWorker{&m.counter("zps_server_pushed_bytes_total", "Tensor bytes received in pushes, by worker", l),
                  &m.counter("zps_server_push_messages_total", "Push requests handled, by worker", l),
                  &m.counter("zps_server_pull_messages_total", "Pull requests handled, by worker", l)});
  }
  pulled_bytes_ = &m.counter("zps_server_pulled_bytes_total", "Tensor bytes sent in pull replies");
  rounds_completed_ = &m.counter("zps_server_rounds_completed_total",
                                 "Key rounds completed: one key's pushes from every worker summed");
  sum_seconds_ = &m.histogram("zps_server_engine_task_duration_seconds",
                              "Time an engine thread spent on one push (the sum) or pull", metrics::latencyBuckets());
  m.gauge("zps_server_table_budget_bytes",
          "Bytes this server's table rows may take (ZPS_TABLE_MEMORY_BYTES; 0: no limit)")
      .set(static_cast<double>(config.table_memory_bytes));
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
    queue_depth_.push_back(&metrics::metrics().gauge(
        "zps_server_engine_queue_depth", "Messages waiting for an engine thread", {{"engine", std::to_string(i)}}));
    Tracer::get().nameTrack(static_cast<uint64_t>(i), "engine " + std::to_string(i));
  }
  current_ = this;
  ZPS_ASSIGN_OR_RETURN(http_, startMetricsEndpoint("server", rank));
  return Status::OK();
}

void ServerObserver::queueDepth(int engine, size_t depth) {
  if (engine >= 0 && engine < static_cast<int>(queue_depth_.size()))
    queue_depth_[engine]->set(static_cast<double>(depth));
}

void ServerObserver::handled(int engine, int worker, const pb::Data& data, size_t payload_bytes, int64_t start_us,
                             size_t reply_bytes, size_t replies) {
  int64_t now = unixMicros();
  int command = wire::commandOf(data);
  const uint64_t key = wire::keyOf(data), round = wire::roundOf(data);
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
    if (round > 0 && valid_worker) {
      std::lock_guard<std::mutex> lock(mu_);
      auto& seen = round_seen_[{key, round}];
      seen.resize(workers_.size());
      if (!seen[worker]) {
        seen[worker] = true;
        if (std::count(seen.begin(), seen.end(), true) == static_cast<long>(seen.size())) {
          round_seen_.erase({key, round});
          rounds_completed_->inc();
          if (round > max_round_) max_round_ = round;
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
  if (Tracer::get().enabled(round)) {
    const char* name = isPush(command) ? "sum" : "pull";
    Tracer::get().complete(name, "server", start_us, now - start_us, static_cast<uint64_t>(engine),
                           "\"key\":" + std::to_string(key) + ",\"round\":" + std::to_string(round) +
                               ",\"worker\":" + std::to_string(worker) + ",\"bytes\":" + std::to_string(payload_bytes) +
                               ",\"server\":" + std::to_string(rank_) + ",\"op\":\"" + opName(command) + "\"");
  }
}

std::atomic<ServerObserver*> ServerObserver::current_{nullptr};

void ServerObserver::handled(int engine, int worker, const pb::Data& data, size_t payload_bytes, int64_t start_us,
                             const std::vector<Outgoing>& out) {
  size_t reply_bytes = 0, replies = 0;
  for (const auto& o : out) {
    if (o.payload.size() == 0) continue;
    reply_bytes += o.payload.size();
    ++replies;
  }
  handled(engine, worker, data, payload_bytes, start_us, reply_bytes, replies);
}

void ServerObserver::fillHeartbeat(pb::Heartbeat* hb) {
  hb->set_round(max_round_.load());
  hb->set_bytes_pushed(bytes_in_.load());
  hb->set_bytes_pulled(bytes_out_.load());
  uint64_t left_out = 0;
  for (auto& t : tableSizes().snapshot(wire::kMaxHeartbeatTables, &left_out)) {
    // Declared names passed the codec's bound already; a longer one would cost the whole heartbeat.
    if (t.name().size() > wire::Limits{}.max_string_bytes) t.mutable_name()->resize(wire::Limits{}.max_string_bytes);
    *hb->add_tables() = std::move(t);
  }
  hb->set_tables_left_out(left_out);
  hb->set_table_budget_bytes(config_.table_memory_bytes);
}
}  // namespace zps
