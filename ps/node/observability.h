// Observability of one zps process: its settings (ZPS_METRICS_PORT, ZPS_TRACE_*), the timeline tracer,
// and the observers the worker and server roles call from their hot paths. Each observer owns its
// role's metrics and, with ZPS_METRICS_PORT set, the HTTP endpoint serving /metrics.
//
// Settings follow ps/common/config: every ZPS_* setting is also a gflag (ZPS_METRICS_PORT =
// --metrics_port), a flag given on the command line wins, and a bad value is an InvalidArgument naming
// the variable (exit 2). They live here rather than in Config so the core config stays about the job.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/http_server.h"
#include "ps/node/metrics.h"

namespace zps {

struct Outgoing;  // ps/server/sum_store.h

struct ObsConfig {
  int metrics_port = 0;           // ZPS_METRICS_PORT; 0 = no HTTP endpoint
  std::string metrics_host = "0.0.0.0";  // ZPS_METRICS_HOST: the address the endpoint listens on
  bool trace_on = false;          // ZPS_TRACE_ON
  uint64_t trace_start_step = 1;  // ZPS_TRACE_START_STEP: first round (= training step) traced
  uint64_t trace_end_step = 20;   // ZPS_TRACE_END_STEP: last round traced
  std::string trace_dir = "zps-trace";  // ZPS_TRACE_DIR
};

StatusOr<ObsConfig> loadObsConfig(const EnvLookup& env);
// Loads the settings once per process (later calls return the first result) and keeps them for
// obsConfig(). Called by main for the scheduler and servers and by Worker::create.
Status initObservability(const EnvLookup& env);
const ObsConfig& obsConfig();

int64_t unixMicros();
std::string jsonEscape(const std::string& s);  // the body of a JSON string, without quotes

// Tracer: Chrome trace-event JSON ("X" complete events) of one process, written to
// ZPS_TRACE_DIR/<role>-<rank>.json at flush(). Events are buffered in memory (capped) and only for
// rounds in [start, end], so a long job costs nothing outside the window. Thread-safe; process-wide.
class Tracer {
 public:
  static Tracer& get();
  void configure(const ObsConfig& config, const std::string& role, int rank);
  bool enabled(uint64_t round) const {
    return on_ && round >= start_ && round <= end_;
  }
  // ts/dur in microseconds on this node's clock (unixMicros); args is a JSON object's body.
  void complete(const std::string& name, const std::string& cat, int64_t ts_us, int64_t dur_us, uint64_t tid,
                const std::string& args);
  void nameTrack(uint64_t tid, const std::string& name);
  // Offset to add to this node's clock to get the scheduler's, from the heartbeat round trip with the
  // smallest delay seen so far (NTP's rule: the shortest round trip bounds the error best).
  void clockSample(int64_t sent_us, int64_t scheduler_us, int64_t received_us);
  Status flush();

 private:
  mutable std::mutex mu_;
  bool on_ = false;
  uint64_t start_ = 0, end_ = 0;
  std::string path_, role_;
  int rank_ = -1;
  std::vector<std::string> events_;
  std::map<uint64_t, std::string> tracks_;
  int64_t offset_us_ = 0;
  int64_t best_rtt_us_ = -1;
  bool flushed_ = false;
};

// The worker's observer: counters per server, request latency histograms, training progress, and what
// the worker's heartbeats tell the scheduler. Owned by the Worker; issued/completed are called by the
// worker with its request lock held, progress by the training program's thread, fillHeartbeat by the
// SchedulerClient's thread.
class WorkerObserver {
 public:
  WorkerObserver(const Config& config);
  ~WorkerObserver();
  // Starts the HTTP endpoint (if configured) and the tracer once the rank is known.
  Status start(int rank);
  // bytes: the tensor (or embedding row) bytes the request pushes or its reply pulls; rows: the number
  // of embedding rows of a PUSH_ROWS or PULL_ROWS request (0 for dense tensors).
  void issued(uint64_t request_id, int command, int server, uint64_t key, uint64_t round, size_t bytes,
              const std::string& tensor, size_t rows = 0);
  void completed(uint64_t request_id, bool ok);
  void progress(uint64_t step, double loss, double samples_per_sec, uint64_t epoch, uint64_t epochs);
  void checkpointed();
  void fillHeartbeat(pb::Heartbeat* hb);

 private:
  struct PerServer {
    metrics::Counter* pushed_bytes;
    metrics::Counter* push_messages;
    metrics::Counter* pulled_bytes;
    metrics::Counter* pull_messages;
    metrics::Counter* pushed_rows;
    metrics::Counter* pulled_rows;
    metrics::Counter* failed;
    metrics::Histogram* latency[3];  // push, pull, push_pull
  };
  struct InFlight {
    int command, server;
    uint64_t key, round;
    size_t bytes, rows;
    int64_t start_us;
    std::string tensor;
  };
  const Config config_;
  int rank_ = -1;
  std::vector<PerServer> servers_;
  std::mutex mu_;
  std::unordered_map<uint64_t, InFlight> inflight_;
  std::atomic<uint64_t> max_round_{0}, bytes_pushed_{0}, bytes_pulled_{0};
  std::atomic<bool> has_progress_{false};
  std::atomic<uint64_t> step_{0}, epoch_{0}, epochs_{0};
  std::atomic<double> loss_{0}, sps_{0};
  std::atomic<int64_t> last_checkpoint_us_{0};
  std::unique_ptr<HttpServer> http_;
};

// The server's observer. received/handled are called on the dispatcher and engine threads.
class ServerObserver {
 public:
  ServerObserver(const Config& config, std::atomic<uint64_t>* malformed);
  ~ServerObserver();
  Status start(int rank);
  // Called by an engine thread around one task: `start_us` when it began, replies = bytes of pull
  // replies it produced.
  void handled(int engine, int worker, const pb::DataHeader& h, size_t payload_bytes, int64_t start_us,
               size_t reply_bytes, size_t replies);
  void handled(int engine, int worker, const pb::DataHeader& h, size_t payload_bytes, int64_t start_us,
               const std::vector<Outgoing>& out);
  void queueDepth(int engine, size_t depth);
  void fillHeartbeat(pb::Heartbeat* hb);
  // The server of this process while it runs (engine threads reach it without a constructor argument).
  static ServerObserver* current() { return current_.load(); }

 private:
  const Config config_;
  int rank_ = -1;
  std::mutex mu_;
  struct PerWorker {
    metrics::Counter* pushed_bytes;
    metrics::Counter* push_messages;
    metrics::Counter* pull_messages;
  };
  std::vector<PerWorker> workers_;
  metrics::Counter* pulled_bytes_ = nullptr;
  std::vector<metrics::Gauge*> queue_depth_;
  metrics::Counter* rounds_completed_ = nullptr;
  metrics::Histogram* sum_seconds_ = nullptr;
  std::map<std::pair<uint64_t, uint64_t>, std::vector<bool>> round_seen_;  // (key, round) -> pushed
  std::atomic<uint64_t> max_round_{0}, bytes_in_{0}, bytes_out_{0};
  std::atomic<int64_t> last_checkpoint_us_{0};
  std::unique_ptr<HttpServer> http_;
  static std::atomic<ServerObserver*> current_;
};

// Starts a role's HTTP endpoint with /metrics when ZPS_METRICS_PORT is set (nullptr otherwise).
// port_offset separates the local ranks of one worker node (ZPS_LOCAL_SIZE > 1), which share a host.
StatusOr<std::unique_ptr<HttpServer>> startMetricsEndpoint(const std::string& role, int rank,
                                                           const std::function<void(HttpServer&)>& more = {},
                                                           int port_offset = 0);

}  // namespace zps
