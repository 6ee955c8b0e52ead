// TcpProxy: a loopback TCP relay a test puts between a node and the scheduler, to cut that node off
// on purpose: hold() stops moving bytes (what is in flight waits in the relay, as on a stalled path),
// cut() closes every relayed connection and drops what it held (a reset that loses messages), and
// release() lets bytes and new connections through again.
//
// Owned by one test case; its own thread relays until the destructor stops it. hold/cut/release may be
// called from the test's thread.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zps::testing {

class TcpProxy {
 public:
  // Listens on listen_host:port and relays every connection to upstream_host:port. Fails the test when
  // it cannot listen.
  TcpProxy(const std::string& listen_host, const std::string& upstream_host, int port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // Returns once the relay thread has stopped moving bytes: nothing crosses after hold() returns.
  void hold();
  void release() { holding_ = false; }
  // Closes every relayed connection; returns how many pairs it closed.
  int cut();
  // Connections relayed so far.
  int accepted() const { return accepted_; }

 private:
  void relay();
  void closePair(size_t i);

  const std::string upstream_host_;
  const int port_;
  int listener_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> holding_{false};
  std::atomic<bool> holding_seen_{false};  // the relay thread's copy of holding_, taken before each poll
  std::atomic<int> accepted_{0};
  std::atomic<bool> cut_requested_{false};
  std::atomic<int> cut_count_{-1};
  std::vector<std::pair<int, int>> pairs_;  // (downstream, upstream) sockets; the relay thread's only
  std::thread thread_;
};

}  // namespace zps::testing
