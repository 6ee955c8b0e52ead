// zps-loopback: the limits zps is measured against, with nothing of zps in the way.
//   zps-loopback rr BYTES ITERS [tcp|ipc]
//                                    raw ZeroMQ REQ/REP round trip between two processes over
//                                    tcp://127.0.0.1 (default) or an abstract ipc:// socket, the two
//                                    transports zps uses on one host (p50 and p99 in microseconds)
//   zps-loopback stream BYTES SECS   raw ZeroMQ PUSH -> PULL throughput between two processes (GB/s)
//   zps-loopback add BYTES           single-thread float32 a[i] += b[i] over BYTES (GB/s of b read)
// Each prints one JSON object per line, for tools/bench/compare.sh. The two-process modes fork, so the
// peer is a separate process (and page tables, scheduler wake-ups) exactly as for zps's own peers.
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "zps-loopback: %s: %s\n", what, zmq_strerror(zmq_errno()));
  std::exit(1);
}

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * v.size()))];
}

// Binds `type` on a free loopback port (or a fresh abstract ipc socket) and returns the socket and
// its endpoint.
void* bindAny(void* ctx, int type, std::string* endpoint, bool ipc = false) {
  void* s = zmq_socket(ctx, type);
  const std::string where = ipc ? "ipc://@zps-loopback-" + std::to_string(getpid()) : "tcp://127.0.0.1:*";
  if (zmq_bind(s, where.c_str()) != 0) die("bind");
  char buf[256];
  size_t len = sizeof(buf);
  zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, buf, &len);
  *endpoint = buf;
  return s;
}

// Runs `child` in a forked process with its own ZeroMQ context; returns its pid.
template <typename F>
pid_t spawn(F child) {
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    std::exit(1);
  }
  if (pid == 0) {
    child();
    std::_Exit(0);
  }
  return pid;
}

int reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int requestReply(size_t bytes, int iters, bool ipc) {
  void* ctx = zmq_ctx_new();
  std::string endpoint;
  void* rep = bindAny(ctx, ZMQ_REP, &endpoint, ipc);
  const int total = iters + iters / 10 + 10;  // the first tenth warms up
  pid_t peer = spawn([&] {
    void* c = zmq_ctx_new();
    void* req = zmq_socket(c, ZMQ_REQ);
    if (zmq_connect(req, endpoint.c_str()) != 0) die("connect");
    std::vector<char> buf(bytes, 1), back(bytes);
    std::vector<double> rtt;
    for (int i = 0; i < total; ++i) {
      auto start = Clock::now();
      if (zmq_send(req, buf.data(), bytes, 0) < 0) die("send");
      if (zmq_recv(req, back.data(), bytes, 0) < 0) die("recv");
      if (i >= total - iters) rtt.push_back(seconds(start, Clock::now()) * 1e6);
    }
    std::printf(
        "{\"test\":\"zmq_rr\",\"transport\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
        ipc ? "ipc" : "tcp", bytes, iters, percentile(rtt, 50), percentile(rtt, 99));
    std::fflush(stdout);
    zmq_close(req);
    zmq_ctx_term(c);
  });
  std::vector<char> buf(bytes);
  for (int i = 0; i < total; ++i) {
    int n = zmq_recv(rep, buf.data(), bytes, 0);
    if (n < 0) die("recv");
    if (zmq_send(rep, buf.data(), static_cast<size_t>(n), 0) < 0) die("send");
  }
  int code = reap(peer);
  zmq_close(rep);
  zmq_ctx_term(ctx);
  return code;
}

int stream(size_t bytes, double secs) {
  void* ctx = zmq_ctx_new();
  std::string endpoint;
  void* pull = bindAny(ctx, ZMQ_PULL, &endpoint);
  pid_t peer = spawn([&] {
    void* c = zmq_ctx_new();
    void* push = zmq_socket(c, ZMQ_PUSH);
    if (zmq_connect(push, endpoint.c_str()) != 0) die("connect");
    std::vector<char> buf(bytes, 1);
    // Zero-copy sends of one reused buffer: the measurement is the socket path, not our memcpy.
    auto start = Clock::now();
    uint64_t flag = 1;
    while (seconds(start, Clock::now()) < secs) {
      zmq_msg_t m;
      zmq_msg_init_data(&m, buf.data(), bytes, nullptr, nullptr);
      if (zmq_msg_send(&m, push, 0) < 0) die("send");
    }
    zmq_msg_t end;
    zmq_msg_init_data(&end, &flag, 1, nullptr, nullptr);  // a 1-byte message says "done"
    zmq_msg_send(&end, push, 0);
    zmq_close(push);
    zmq_ctx_term(c);
  });
  zmq_msg_t m;
  zmq_msg_init(&m);
  uint64_t received = 0, messages = 0;
  Clock::time_point first{};
  for (;;) {
    if (zmq_msg_recv(&m, pull, 0) < 0) die("recv");
    size_t n = zmq_msg_size(&m);
    if (n == 1) break;
    if (messages++ == 0)
      first = Clock::now();  // timing starts once the connection is up
    else
      received += n;
  }
  double elapsed = seconds(first, Clock::now());
  zmq_msg_close(&m);
  std::printf("{\"test\":\"zmq_stream\",\"bytes\":%zu,\"messages\":%llu,\"gbs\":%.3f}\n", bytes,
              static_cast<unsigned long long>(messages), received / elapsed / 1e9);
  int code = reap(peer);
  zmq_close(pull);
  zmq_ctx_term(ctx);
  return code;
}

__attribute__((noinline)) void addInto(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

int add(size_t bytes) {
  size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f);  // touched once here, so the timed passes see no page faults
  std::vector<double> gbs;
  for (int rep = 0; rep < 5; ++rep) {
    auto start = Clock::now();
    addInto(a.data(), b.data(), n);
    gbs.push_back(bytes / seconds(start, Clock::now()) / 1e9);
  }
  std::printf("{\"test\":\"add\",\"bytes\":%zu,\"gbs\":%.3f,\"check\":%.0f}\n", bytes, percentile(gbs, 50), a[n / 2]);
  return 0;
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k')
    v <<= 10, ++end;
  else if (*end == 'M' || *end == 'm')
    v <<= 20, ++end;
  if (*end != '\0' || v == 0 || v > (1ull << 32)) {
    std::fprintf(stderr, "zps-loopback: '%s' is not a size like 4096, 4K or 1M\n", s);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  const std::string transport = argc == 5 ? argv[4] : "tcp";
  if (mode == "rr" && (argc == 4 || (argc == 5 && (transport == "tcp" || transport == "ipc"))))
    return requestReply(parseBytes(argv[2]), std::max(1, std::atoi(argv[3])), transport == "ipc");
  if (mode == "stream" && argc == 4) return stream(parseBytes(argv[2]), std::max(0.1, std::atof(argv[3])));
  if (mode == "add" && argc == 3) return add(parseBytes(argv[2]));
  std::fprintf(stderr, "usage: zps-loopback rr BYTES ITERS [tcp|ipc] | stream BYTES SECONDS | add BYTES\n");
  return 2;
}
