#include "tools/launch_signals.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace zps {
namespace {

// What the handler may touch: the pipe's write end and two counters.
int g_wake_write_fd = -1;
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_count = 0;  // only the handler writes it; handlers do not nest

void onSignal(int sig) {
  int saved_errno = errno;
  if (sig != SIGCHLD) {
    if (g_stop_count == 0) g_stop_signal = sig;
    g_stop_count = g_stop_count + 1;
  }
  char byte = static_cast<char>(sig);
  ssize_t ignored = write(g_wake_write_fd, &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

}  // namespace

Status StopSignals::install() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Unavailable(std::string("pipe2: ") + std::strerror(errno));
  wake_read_fd_ = fds[0];
  g_wake_write_fd = fds[1];
  g_stop_signal = 0;
  g_stop_count = 0;
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sigaddset(&sa.sa_mask, SIGCHLD);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGCHLD, &sa, &old_chld_);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_pipe_);
  installed_ = true;
  return Status::OK();
}

void StopSignals::restore() {
  if (!installed_) return;
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGCHLD, &old_chld_, nullptr);
  sigaction(SIGPIPE, &old_pipe_, nullptr);
  close(wake_read_fd_);
  close(g_wake_write_fd);
  wake_read_fd_ = -1;
  g_wake_write_fd = -1;
  installed_ = false;
}

void StopSignals::drain() {
  char buf[64];
  while (read(wake_read_fd_, buf, sizeof(buf)) > 0) {
  }
}

int StopSignals::stopSignal() const { return g_stop_signal; }
int StopSignals::stopCount() const { return g_stop_count; }

}  // namespace zps
