// HttpServer: the small HTTP endpoint every role serves with ZPS_METRICS_PORT (/metrics; the scheduler
// adds /, /api/status, /status and /healthz). A thin wrapper over cpp-httplib (Debian's
// libcpp-httplib-dev) so no other file includes httplib.h and the HTTP parsing is a maintained
// library's, not ours.
//
// Lifetime: owned by the role's observer; handlers are added before start(), which binds the port and
// serves GETs until stop() or destruction. Each connection gets a thread of its own, up to
// kMaxConnectionThreads at once (later ones wait for one to end), so that slow or idle clients, each
// cut off by a 2 s read timeout, cannot keep a probe of /healthz waiting. Handlers run on those threads
// and must be thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zps/status.h"

namespace zps {

class HttpServer {
 public:
  struct Response {
    int status = 200;
    std::string content_type = "text/plain; charset=utf-8";
    std::string body;
  };
  using Query = std::map<std::string, std::string>;
  using Handler = std::function<Response(const Query& query)>;

  HttpServer();
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void get(const std::string& path, Handler handler);
  // From now on every path but `open_paths` needs a token that `check` accepts, given as
  // "Authorization: Bearer TOKEN" or "?token=TOKEN" (the dashboard page's address); others get 401.
  void requireToken(std::function<bool(const std::string&)> check, std::vector<std::string> open_paths);
  // Binds host:port (0 = a free port) and starts serving. A port that cannot be bound is an
  // InvalidArgument naming `setting` (the user picked it).
  Status start(const std::string& host, int port, const std::string& setting);
  void stop();
  int port() const { return port_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

// One GET with a deadline (zps status, tests). Returns the HTTP status and body; kUnavailable when the
// server cannot be reached.
// `token` non-empty: sent as "Authorization: Bearer TOKEN".
StatusOr<std::pair<int, std::string>> httpGet(const std::string& host, int port, const std::string& path,
                                              std::chrono::milliseconds timeout, const std::string& token = "");

}  // namespace zps
