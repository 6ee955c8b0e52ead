// WorkerObserver: the worker role's metrics, trace events and heartbeat progress (ps/node/observability.h
// holds what all roles share).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/http_server.h"
#include "ps/node/metrics.h"
#include "ps/node/observability.h"

namespace zps {

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

}  // namespace zps
