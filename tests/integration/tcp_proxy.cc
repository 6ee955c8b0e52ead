#include "tests/integration/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>

namespace zps::testing {
namespace {

sockaddr_in address(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  return a;
}

// Moves what `from` has to `to`; false when either side is closed.
bool pump(int from, int to) {
  char buffer[64 << 10];
  const ssize_t n = ::recv(from, buffer, sizeof(buffer), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return false;
  for (ssize_t sent = 0; n > 0 && sent < n;) {
    const ssize_t k = ::send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
    if (k <= 0) return false;
    sent += k;
  }
  return true;
}

}  // namespace

TcpProxy::TcpProxy(const std::string& listen_host, const std::string& upstream_host, int port)
    : upstream_host_(upstream_host), port_(port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listener_ >= 0);
  const int one = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in a = address(listen_host, port);
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listener_, 16) != 0) {
    const std::string why = strerror(errno);
    ::close(listener_);
    FAIL("TcpProxy cannot listen on " << listen_host << ":" << port << ": " << why);
  }
  thread_ = std::thread([this] { relay(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  for (size_t i = pairs_.size(); i > 0; --i) closePair(i - 1);
  ::close(listener_);
}

void TcpProxy::hold() {
  holding_ = true;
  // A poll that began before the hold may still pump once; the next pass of the loop sees the hold.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!holding_seen_ && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(holding_seen_);
}

int TcpProxy::cut() {
  cut_count_ = -1;
  cut_requested_ = true;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (cut_count_ < 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return cut_count_;
}

void TcpProxy::closePair(size_t i) {
  // SO_LINGER 0: the peers see a reset, as after `ss -K`, not an orderly close.
  const linger reset{1, 0};
  for (int fd : {pairs_[i].first, pairs_[i].second}) {
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    ::close(fd);
  }
  pairs_.erase(pairs_.begin() + static_cast<long>(i));
}

void TcpProxy::relay() {
  while (!stop_) {
    if (cut_requested_.exchange(false)) {
      const int n = static_cast<int>(pairs_.size());
      while (!pairs_.empty()) closePair(pairs_.size() - 1);
      cut_count_ = n;
    }
    const bool holding = holding_;
    holding_seen_ = holding;
    std::vector<pollfd> fds = {{listener_, POLLIN, 0}};
    if (!holding)
      for (const auto& [down, up] : pairs_) {
        fds.push_back({down, POLLIN, 0});
        fds.push_back({up, POLLIN, 0});
      }
    if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
    if ((fds[0].revents & POLLIN) != 0) {
      const int down = ::accept(listener_, nullptr, nullptr);
      const int up = down >= 0 ? ::socket(AF_INET, SOCK_STREAM, 0) : -1;
      const sockaddr_in a = address(upstream_host_, port_);
      if (up >= 0 && ::connect(up, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) {
        pairs_.emplace_back(down, up);
        ++accepted_;
      } else {
        if (up >= 0) ::close(up);
        if (down >= 0) ::close(down);
      }
    }
    for (size_t i = 1; i + 1 < fds.size(); i += 2) {
      const bool down_ok = (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0 || pump(fds[i].fd, fds[i + 1].fd);
      const bool up_ok = (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) == 0 || pump(fds[i + 1].fd, fds[i].fd);
      if (!down_ok || !up_ok) fds[i].fd = -1;  // closed below, after the scan
    }
    for (size_t i = fds.size() - 1; i >= 2; i -= 2)
      if (fds[i - 1].fd == -1) closePair((i - 1) / 2);
  }
}

}  // namespace zps::testing
