// `zps probe`: a readiness/liveness check for the scheduler. It succeeds when a TCP connection to the
// scheduler's port can be established within --probe_timeout seconds: a scheduler that listens is ready
// (it binds its port before anything else, and every node can start registering from then on).
//
//   zps probe                          # DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT
//   zps probe --host 127.0.0.1         # inside the scheduler's own pod (Kubernetes exec probe)
//   zps probe --host sched --port 9000 --probe_timeout 5
//
// Exit codes: 0 reachable; 1 not reachable (one line says what failed); 2 bad flags or environment.
// It opens a plain socket and closes it at once; it never speaks the zps protocol, so it works with
// any role's environment and without DMLC_ROLE.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include "tools/command_line.h"
#include "tools/programs.h"

ZPS_FLAG(probe, std::string, host, "", "host name or IP to connect to (default: DMLC_PS_ROOT_URI)");
ZPS_FLAG(probe, int32_t, port, 0, "TCP port to connect to (default: DMLC_PS_ROOT_PORT)");
ZPS_FLAG(probe, double, probe_timeout, 2, "seconds to wait for the connection (name lookup included)");

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

std::string trimmed(const char* s) {
  std::string v = s == nullptr ? "" : s;
  size_t b = v.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return v.substr(b, v.find_last_not_of(" \t\r\n") - b + 1);
}

std::string addressText(const struct sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  return buf;
}

// One non-blocking connect, bounded by `deadline`. Returns "" on success, else why it failed.
std::string connectOnce(const struct addrinfo* ai, Clock::time_point deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return std::string("socket: ") + std::strerror(errno);
  std::string error;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
    } else {
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
          error = "no answer";
          break;
        }
        struct pollfd p = {fd, POLLOUT, 0};
        int rc = poll(&p, 1, static_cast<int>(left));
        if (rc < 0 && errno == EINTR) continue;
        if (rc < 0) {
          error = std::string("poll: ") + std::strerror(errno);
          break;
        }
        if (rc == 0) continue;  // re-checks the deadline
        int so_error = 0;
        socklen_t len = sizeof(so_error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        if (so_error != 0) error = std::strerror(so_error);
        break;
      }
    }
  }
  close(fd);
  return error;
}

}  // namespace

int probeMain() {
  // Arguments: flags first, then the environment every role already has.
  std::string host = FLAGS_host.empty() ? trimmed(std::getenv("DMLC_PS_ROOT_URI")) : FLAGS_host;
  if (host.empty()) {
    std::cerr << "zps probe: no host to probe; set DMLC_PS_ROOT_URI or pass --host" << std::endl;
    return 2;
  }
  long port = FLAGS_port;
  if (port == 0) {
    std::string v = trimmed(std::getenv("DMLC_PS_ROOT_PORT"));
    if (v.empty()) {
      std::cerr << "zps probe: no port to probe; set DMLC_PS_ROOT_PORT or pass --port" << std::endl;
      return 2;
    }
    char* end = nullptr;
    errno = 0;
    port = std::strtol(v.c_str(), &end, 10);
    if (errno != 0 || end == v.c_str() || *end != '\0' || port < 1 || port > 65535) {
      std::cerr << "zps probe: DMLC_PS_ROOT_PORT='" << v << "' is not a TCP port; set it to 1..65535" << std::endl;
      return 2;
    }
  } else if (port < 1 || port > 65535) {
    std::cerr << "zps probe: --port=" << port << " is not a TCP port; use 1..65535" << std::endl;
    return 2;
  }
  if (!std::isfinite(FLAGS_probe_timeout) || FLAGS_probe_timeout <= 0 || FLAGS_probe_timeout > 3600) {
    std::cerr << "zps probe: --probe_timeout=" << FLAGS_probe_timeout << " is out of range; use (0, 3600] seconds"
              << std::endl;
    return 2;
  }

  std::string target = host + ":" + std::to_string(port);
  auto deadline = Clock::now() + std::chrono::milliseconds(std::llround(FLAGS_probe_timeout * 1000));
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    std::cerr << "zps probe: " << target << " not reachable: cannot resolve '" << host << "' (" << gai_strerror(rc)
              << ")" << std::endl;
    return 1;
  }
  std::string failures;
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    std::string ip = addressText(ai->ai_addr);
    std::string error = connectOnce(ai, deadline);
    if (error.empty()) {
      freeaddrinfo(res);
      std::cout << "zps probe: " << target << " (" << ip << ") accepts connections" << std::endl;
      return 0;
    }
    if (error == "no answer") {
      std::ostringstream os;
      os << " within " << FLAGS_probe_timeout << " s (--probe_timeout)";
      error += os.str();
    }
    failures += (failures.empty() ? "" : "; ") + ip + ": " + error;
  }
  freeaddrinfo(res);
  std::cerr << "zps probe: " << target << " not reachable (" << failures << ")" << std::endl;
  return 1;
}

}  // namespace zps
