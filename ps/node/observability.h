// Observability shared by every role of one zps process: its settings (ZPS_METRICS_PORT, ZPS_TRACE_*),
// the timeline tracer and the /metrics endpoint. Each role's observer lives with that role
// (worker/worker_observer.h, server/server_observer.h, scheduler/status_board.h); it owns the role's
// metrics and, with ZPS_METRICS_PORT set, the HTTP endpoint that startMetricsEndpoint starts.
//
// Settings follow ps/common/config: every ZPS_* setting is also a gflag (ZPS_METRICS_PORT =
// --metrics_port), a flag given on the command line wins, and a bad value is an InvalidArgument naming
// the variable (exit 2). They live here rather than in Config so the core config stays about the job.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/config.h"
#include "ps/node/http_server.h"
#include "ps/node/metrics.h"

namespace zps {

struct ObsConfig {
  int metrics_port = integerDefault(settings::kMetricsPort);  // ZPS_METRICS_PORT; 0 = no HTTP endpoint
  std::string metrics_host;  // ZPS_METRICS_HOST: the address the endpoint listens on (default: bindHostFrom)
  bool trace_on = switchDefault(settings::kTraceOn);                      // ZPS_TRACE_ON
  uint64_t trace_start_step = integerDefault(settings::kTraceStartStep);  // first round (= training step) traced
  uint64_t trace_end_step = integerDefault(settings::kTraceEndStep);      // last round traced
  std::string trace_dir{settings::kTraceDir.default_text};                // ZPS_TRACE_DIR
};

StatusOr<ObsConfig> loadObsConfig(const EnvLookup& env);
// Loads the settings once per process (later calls return the first result) and keeps them for
// obsConfig(). Called by main for the scheduler and servers and by Worker::create.
Status initObservability(const EnvLookup& env);
const ObsConfig& obsConfig();

int64_t unixMicros();
std::string jsonEscape(const std::string& s);  // the body of a JSON string, without quotes

// The names and kinds of data commands (pb::Command) as the observers count and trace them.
const char* opName(int command);  // "push", "pull", "push_pull", "push_rows", "pull_rows" or "other"
bool isPush(int command);         // sends tensor bytes or rows to a server
bool isPull(int command);         // has tensor bytes or rows in its reply

// Tracer: Chrome trace-event JSON ("X" complete events) of one process, written to
// ZPS_TRACE_DIR/<role>-<rank>.json at flush(). Events are buffered in memory (capped) and only for
// rounds in [start, end], so a long job costs nothing outside the window. Thread-safe; process-wide.
class Tracer {
 public:
  static Tracer& get();
  void configure(const ObsConfig& config, const std::string& role, int rank);
  bool enabled(uint64_t round) const { return on_ && round >= start_ && round <= end_; }
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

// Starts a role's HTTP endpoint with /metrics when ZPS_METRICS_PORT is set (nullptr otherwise).
// port_offset separates the local ranks of one worker node (ZPS_LOCAL_SIZE > 1), which share a host.
StatusOr<std::unique_ptr<HttpServer>> startMetricsEndpoint(const std::string& role, int rank,
                                                           const std::function<void(HttpServer&)>& more = {},
                                                           int port_offset = 0);

}  // namespace zps
