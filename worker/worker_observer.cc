#include "worker/worker_observer.h"

#include <glog/logging.h>

#include <cmath>

namespace zps {
namespace {

int latencySlot(int c) { return c == pb::CMD_PUSH || c == pb::CMD_PUSH_ROWS ? 0 : c == pb::CMD_PUSH_PULL ? 2 : 1; }

}  // namespace

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
  m.callback("zps_training_epoch", "Training epoch in progress (1-based; 0 when the program has no epochs)", false, {},
             [this] { return static_cast<double>(epoch_.load()); });
  m.callback("zps_training_loss", "Training loss last reported by the program", false, {},
             [this] { return has_progress_ ? loss_.load() : std::nan(""); });
  m.callback("zps_training_samples_per_second", "Training throughput last reported by the program", false, {},
             [this] { return sps_.load(); });
}

WorkerObserver::~WorkerObserver() {
  if (http_) http_->stop();
  for (const char* name :
       {"zps_worker_inflight_requests", "zps_worker_round", "zps_training_step", "zps_training_epoch",
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
  inflight_[request_id] = InFlight{
      command, server, key, round, bytes, rows, unixMicros(), Tracer::get().enabled(round) ? tensor : std::string()};
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

}  // namespace zps
