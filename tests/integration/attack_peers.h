// Hostile peers for the memory-attack tests (tests/integration/memory_attack_test.cc): raw TCP clients
// that speak just enough ZMTP 3.0 to start a handshake or a message and never finish it, libzmq clients
// without the token, and a watch of a process's RSS.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace zps::testing::attack {

using namespace std::chrono_literals;

constexpr size_t kMiB = size_t{1} << 20;

inline size_t rssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

// Samples a process's RSS until stopped; peak() is the largest sample.
class RssWatch {
 public:
  explicit RssWatch(pid_t pid) : pid_(pid), baseline_(rssBytes(pid)), peak_(baseline_) {
    thread_ = std::thread([this] {
      while (!stop_) {
        size_t now = rssBytes(pid_);
        size_t seen = peak_.load();
        while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  ~RssWatch() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  size_t baseline() const { return baseline_; }
  size_t growth() const { return peak_ > baseline_ ? peak_ - baseline_ : 0; }

 private:
  pid_t pid_;
  size_t baseline_;
  std::atomic<size_t> peak_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

inline int tcpConnect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{0, 200'000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// A ZMTP 3.0 greeting offering `mechanism`, as a client.
inline std::string greeting(const std::string& mechanism) {
  std::string g(64, '\0');
  g[0] = static_cast<char>(0xFF);
  g[9] = 0x7F;
  g[10] = 3;
  std::memcpy(&g[12], mechanism.data(), mechanism.size());
  return g;
}

// A ZMTP frame header: flags (1 more, 2 long, 4 command) and an 8-byte big-endian size.
inline std::string longFrameHeader(uint8_t flags, uint64_t size) {
  std::string h(9, '\0');
  h[0] = static_cast<char>(flags | 2);
  for (int i = 0; i < 8; ++i) h[1 + i] = static_cast<char>(size >> (8 * (7 - i)));
  return h;
}

// The NULL mechanism's READY command of a DEALER (ZMTP 3.0), which ends a NULL handshake.
inline std::string readyCommand() {
  std::string body = std::string("\x05READY") + "\x0bSocket-Type" + std::string("\0\0\0\x06", 4) + "DEALER";
  return std::string(1, '\x04') + std::string(1, static_cast<char>(body.size())) + body;
}

// Raw TCP attacks on one port, run by their own threads until stop(); sent() counts bytes written.
class RawAttack {
 public:
  static constexpr size_t kMaxPerConnection = 32 * kMiB;

  RawAttack(int port, int idle) {
    for (int i = 0; i < idle; ++i) {
      int fd = tcpConnect(port);
      if (fd >= 0) idle_.push_back(fd);
    }
    // Large frames sent slowly, inside a PLAIN handshake that never completes, and unfinished
    // multi-part messages after a NULL greeting; each connection again when the node closes it.
    for (int t = 0; t < 4; ++t) {
      threads_.emplace_back([this, port, t] {
        bool plain = t % 2 == 0;
        while (!stop_) {
          int fd = tcpConnect(port);
          if (fd < 0) continue;
          std::string start = plain ? greeting("PLAIN") + longFrameHeader(4, 900 * 1024)
                                    : greeting("NULL") + readyCommand() + longFrameHeader(1, 64 * 1024);
          bool open = send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0;
          std::string chunk(plain ? 1024 : 64 * 1024, 'a');
          size_t on_this_connection = 0;
          while (open && !stop_) {
            if (on_this_connection >= kMaxPerConnection) {  // enough to show a pile-up; hold it
              std::this_thread::sleep_for(50ms);
              continue;
            }
            ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
            if (n > 0) {
              sent_ += static_cast<size_t>(n);
              on_this_connection += static_cast<size_t>(n);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK)
              open = false;
            if (!plain && n > 0) {
              std::string next = longFrameHeader(1, 64 * 1024);
              open = send(fd, next.data(), next.size(), MSG_NOSIGNAL) > 0;
            }
            std::this_thread::sleep_for(plain ? 50ms : 1ms);
          }
          close(fd);
        }
      });
    }
  }
  ~RawAttack() {
    stop();
    for (int fd : idle_) close(fd);
  }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  size_t sent() const { return sent_; }
  // Idle connections the node has closed (a read returns end of file or an error).
  int idleClosed() const {
    int closed = 0;
    for (int fd : idle_) {
      char buf[256];
      ssize_t n;
      while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
      }  // the node's greeting
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
    }
    return closed;
  }
  int idleOpened() const { return static_cast<int>(idle_.size()); }

 private:
  std::vector<int> idle_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> sent_{0};
};

// libzmq clients without the token, or with a wrong one, that try to send unfinished multi-part messages.
class ZmqAttack {
 public:
  explicit ZmqAttack(int port) : ctx_(zmq_ctx_new()) {
    for (int i = 0; i < 4; ++i) {
      void* s = zmq_socket(ctx_, ZMQ_DEALER);
      int linger = 0, hwm = 0;
      zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
      zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
      if (i % 2 == 1) {
        zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "zps", 3);
        zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, "wrong-password", 14);
      }
      std::string ep = "tcp://127.0.0.1:" + std::to_string(port);
      zmq_connect(s, ep.c_str());
      sockets_.push_back(s);
    }
    thread_ = std::thread([this] {
      std::string frame(64 * 1024, 'm');
      while (!stop_) {
        for (void* s : sockets_) zmq_send(s, frame.data(), frame.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~ZmqAttack() {
    stop_ = true;
    thread_.join();
    for (void* s : sockets_) zmq_close(s);
    zmq_ctx_term(ctx_);
  }

 private:
  void* ctx_;
  std::vector<void*> sockets_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace zps::testing::attack
