#include "ps/node/http_server.h"

#include <glog/logging.h>
#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace zps {

namespace {

// Connections served at once; each costs a thread (a small stack touched) while it lasts.
constexpr size_t kMaxConnectionThreads = 128;

// httplib's task queue with a thread per connection instead of a fixed pool: with a pool of N threads,
// N clients that send nothing hold every thread for the read timeout, again and again, and a probe
// waits behind them. Threads are started on demand up to kMaxConnectionThreads and end with their
// connection (after taking any that waited); shutdown() waits for them.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> task) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->running >= kMaxConnectionThreads) {
      state_->waiting.push_back(std::move(task));
      return;
    }
    ++state_->running;
    // The thread owns a reference to the state: it may still be unlocking after shutdown() returned.
    std::thread([state = state_, task = std::move(task)]() mutable { run(*state, std::move(task)); }).detach();
  }

  void shutdown() override {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->done.wait(lock, [this] { return state_->running == 0; });
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable done;
    size_t running = 0;
    std::deque<std::function<void()>> waiting;
  };

  static void run(State& state, std::function<void()> task) {
    for (;;) {
      task();
      std::lock_guard<std::mutex> lock(state.mu);
      if (state.waiting.empty()) {
        --state.running;
        state.done.notify_all();
        return;
      }
      task = std::move(state.waiting.front());
      state.waiting.pop_front();
    }
  }

  std::shared_ptr<State> state_ = std::make_shared<State>();
};

bool bearerToken(const httplib::Request& req, std::string* token) {
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.rfind(prefix, 0) == 0) {
    *token = auth.substr(prefix.size());
    return true;
  }
  if (req.has_param("token")) {
    *token = req.get_param_value("token");
    return true;
  }
  return false;
}

}  // namespace

struct HttpServer::Impl {
  httplib::Server server;
  std::function<bool(const std::string&)> token_check;  // set: paths outside open_paths need a token
  std::vector<std::string> open_paths;
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {
  impl_->server.new_task_queue = [] { return new ConnectionThreads(); };
  impl_->server.set_read_timeout(2, 0);
  impl_->server.set_write_timeout(5, 0);
  impl_->server.set_keep_alive_timeout(2);
  impl_->server.set_payload_max_length(64 * 1024);  // GETs only: any body is refused
}

void HttpServer::requireToken(std::function<bool(const std::string&)> check, std::vector<std::string> open_paths) {
  impl_->token_check = std::move(check);
  impl_->open_paths = std::move(open_paths);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::get(const std::string& path, Handler handler) {
  impl_->server.Get(
      path, [this, path, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
        const auto& open = impl_->open_paths;
        if (impl_->token_check && std::find(open.begin(), open.end(), path) == open.end()) {
          std::string token;
          if (!bearerToken(req, &token) || !impl_->token_check(token)) {
            res.status = 401;
            res.set_header("WWW-Authenticate", "Bearer");
            res.set_content("this endpoint needs the job's ZPS_AUTH_TOKEN (Authorization: Bearer, or ?token=)\n",
                            "text/plain; charset=utf-8");
            return;
          }
        }
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
                                              std::chrono::milliseconds timeout, const std::string& token) {
  httplib::Client client(host, port);
  if (!token.empty()) client.set_bearer_token_auth(token.c_str());
  auto sec = static_cast<time_t>(timeout.count() / 1000);
  auto usec = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_write_timeout(sec, usec);
  auto res = client.Get(path.c_str());
  if (!res)
    return Unavailable("GET http://" + host + ":" + std::to_string(port) + path +
                       " failed: " + httplib::to_string(res.error()));
  return std::make_pair(res->status, res->body);
}

}  // namespace zps
