#include "ps/node/resolve.h"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netdb.h>

#include <algorithm>
#include <thread>

#include "ps/common/config.h"

namespace zps {
namespace {

bool resolveOnce(const std::string& host, std::string* ip, std::string* error) {
  struct addrinfo hints = {};
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    *error = gai_strerror(rc);
    return false;
  }
  std::string v6;
  for (auto* p = res; p != nullptr; p = p->ai_next) {
    char buf[INET6_ADDRSTRLEN];
    if (p->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(p->ai_addr)->sin_addr, buf, sizeof(buf));
      *ip = buf;
      freeaddrinfo(res);
      return true;
    }
    if (p->ai_family == AF_INET6 && v6.empty()) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(p->ai_addr)->sin6_addr, buf, sizeof(buf));
      v6 = buf;
    }
  }
  freeaddrinfo(res);
  if (v6.empty()) {
    *error = "no IPv4 or IPv6 address";
    return false;
  }
  *ip = v6;
  return true;
}

}  // namespace

StatusOr<std::string> resolveWithRetry(const std::string& host, std::chrono::milliseconds timeout,
                                       const std::string& what) {
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  std::chrono::milliseconds backoff(100);
  std::string ip, error;
  for (int attempt = 1;; ++attempt) {
    if (resolveOnce(host, &ip, &error)) {
      if (attempt > 1)
        LOG(INFO) << what << " '" << host << "' resolved to " << ip << " after " << attempt << " attempts";
      return ip;
    }
    auto now = std::chrono::steady_clock::now();
    if (now + backoff > deadline) {
      double waited = std::chrono::duration<double>(now - start).count();
      return InvalidArgument(what + " '" + host + "' does not resolve (" + error + "; tried " +
                             std::to_string(attempt) + " times over " + std::to_string(static_cast<int>(waited)) +
                             " s, ZPS_CONNECT_TIMEOUT=" + secondsText(timeout) + " s); check the name or IP");
    }
    LOG(WARNING) << "cannot resolve " << what << " '" << host << "' (" << error << "), attempt " << attempt
                 << "; retrying in " << backoff.count() << " ms";
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace zps
