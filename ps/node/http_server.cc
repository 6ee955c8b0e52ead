#include "ps/node/http_server.h"

#include <glog/logging.h>
#include <httplib.h>

namespace zps {

struct HttpServer::Impl {
  httplib::Server server;
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {
  // Scrapes and dashboard polls are rare; two threads keep a node's footprint small.
  impl_->server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  impl_->server.set_read_timeout(5, 0);
  impl_->server.set_write_timeout(5, 0);
  impl_->server.set_keep_alive_timeout(2);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(const std::string& path, Handler handler) {
  impl_->server.Get(path, [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    Query query;
    for (const auto& [k, v] : req.params) query[k] = v;
    Response r = handler(query);
    res.status = r.status;
    res.set_header("Cache-Control", "no-store");
    res.set_content(r.body, r.content_type.c_str());
  });
}

Status HttpServer::start(const std::string& host, int port, const std::string& setting) {
  if (port == 0) {
    port_ = impl_->server.bind_to_any_port(host);
    if (port_ <= 0) return Unavailable("cannot bind any HTTP port on " + host);
  } else {
    if (!impl_->server.bind_to_port(host, port))
      return InvalidArgument(setting + "=" + std::to_string(port) + ": cannot listen on " + host + ":" +
                             std::to_string(port) + " (in use?); pick a free port");
    port_ = port;
  }
  thread_ = std::thread([this] { impl_->server.listen_after_bind(); });
  return Status::OK();
}

void HttpServer::stop() {
  if (!thread_.joinable()) return;
  impl_->server.stop();
  thread_.join();
}

StatusOr<std::pair<int, std::string>> httpGet(const std::string& host, int port, const std::string& path,
                                              std::chrono::milliseconds timeout) {
  httplib::Client client(host, port);
  auto sec = static_cast<time_t>(timeout.count() / 1000);
  auto usec = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Get(path.c_str());
  if (!res)
    return Unavailable("GET http://" + host + ":" + std::to_string(port) + path + " failed: " +
                       httplib::to_string(res.error()));
  return std::make_pair(res->status, res->body);
}

}  // namespace zps
