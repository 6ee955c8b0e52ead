#include "ps/node/observability.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace zps {
namespace {

std::mutex g_config_mu;
std::optional<ObsConfig> g_config;

void registerNodeInfo(const std::string& role, int rank) {
  metrics::metrics()
      .gauge("zps_node_info", "Always 1; labels say which node this endpoint belongs to",
             {{"role", role}, {"rank", std::to_string(rank)}})
      .set(1);
}

// A trace is written at the end of the job: a folder that cannot take it is found at the start instead,
// where the user can still fix it, by creating it and a file in it.
Status checkTraceDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return InvalidArgument("ZPS_TRACE_DIR=" + dir + " cannot be created: " + ec.message() + "; set a writable folder");
  std::string probe = dir + "/.zps-write-test-XXXXXX";
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return InvalidArgument("ZPS_TRACE_DIR=" + dir + " is not writable: " + std::strerror(errno) +
                           "; set a writable folder");
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

}  // namespace

StatusOr<ObsConfig> loadObsConfig(const EnvLookup& env) {
  ObsConfig c;
  ZPS_ASSIGN_OR_RETURN(long long port, readInteger(env, settings::kMetricsPort));
  c.metrics_port = static_cast<int>(port);
  ZPS_ASSIGN_OR_RETURN(c.metrics_host, readText(env, settings::kMetricsHost));
  if (c.metrics_host.empty()) {  // the node's listening address
    ZPS_ASSIGN_OR_RETURN(c.metrics_host, bindHostFrom(env));
  }
  ZPS_ASSIGN_OR_RETURN(c.trace_on, readSwitch(env, settings::kTraceOn));
  ZPS_ASSIGN_OR_RETURN(long long start, readInteger(env, settings::kTraceStartStep));
  ZPS_ASSIGN_OR_RETURN(long long end, readInteger(env, settings::kTraceEndStep));
  if (end < start)
    return InvalidArgument("ZPS_TRACE_END_STEP (" + std::to_string(end) + ") is before ZPS_TRACE_START_STEP (" +
                           std::to_string(start) + "); set it to a later step");
  c.trace_start_step = static_cast<uint64_t>(start);
  c.trace_end_step = static_cast<uint64_t>(end);
  ZPS_ASSIGN_OR_RETURN(c.trace_dir, readText(env, settings::kTraceDir));
  if (c.trace_dir.empty()) return InvalidArgument("ZPS_TRACE_DIR is empty; set it to a folder");
  if (c.trace_on) ZPS_RETURN_IF_ERROR(checkTraceDir(c.trace_dir));
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
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
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
  std::string e = "{\"name\":\"" + jsonEscape(name) + "\",\"cat\":\"" + cat +
                  "\",\"ph\":\"X\",\"ts\":" + std::to_string(ts_us) +
                  ",\"dur\":" + std::to_string(std::max<int64_t>(dur_us, 0)) +
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
      << ",\"clock_offset_us\":" << offset_us_ << ",\"clock_rtt_us\":" << best_rtt_us_ << ",\"start_step\":" << start_
      << ",\"end_step\":" << end_ << "},\n\"traceEvents\":[\n";
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
  LOG(INFO) << role << (rank >= 0 ? " " + std::to_string(rank) : "") << ": metrics on http://" << c.metrics_host << ":"
            << http->port() << "/metrics";
  return http;
}

}  // namespace zps
