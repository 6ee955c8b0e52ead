// ServerObserver: the server role's metrics, trace events and heartbeat counters (ps/node/observability.h
// holds what all roles share).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/http_server.h"
#include "ps/node/metrics.h"
#include "ps/node/observability.h"

namespace zps {

struct Outgoing;  // server/sum_store.h

// The server's observer. received/handled are called on the dispatcher and engine threads.
class ServerObserver {
 public:
  ServerObserver(const Config& config, std::atomic<uint64_t>* malformed);
  ~ServerObserver();
  Status start(int rank);
  // Called by an engine thread around one task: `start_us` when it began, replies = bytes of pull
  // replies it produced.
  void handled(int engine, int worker, const pb::Data& data, size_t payload_bytes, int64_t start_us, size_t reply_bytes,
               size_t replies);
  void handled(int engine, int worker, const pb::Data& data, size_t payload_bytes, int64_t start_us,
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

}  // namespace zps
