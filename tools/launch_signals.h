// `zps launch`'s signals: SIGINT and SIGTERM (stop the job; a second one means "now") and SIGCHLD
// (a child ended) only record the signal and wake launch's loop through a pipe. One StopSignals is
// installed at a time, by the Launcher on the main thread.
#pragma once

#include <signal.h>

#include "zps/status.h"

namespace zps {

class StopSignals {
 public:
  StopSignals() = default;
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals() { restore(); }

  Status install();
  // The handlers launch replaced, back in place; the wake pipe closed.
  void restore();

  // Readable when a signal arrived since the last drain(); -1 before install().
  int wakeFd() const { return wake_read_fd_; }
  void drain();
  // The first SIGINT or SIGTERM received (0: none), and how many were received in all.
  int stopSignal() const;
  int stopCount() const;

 private:
  int wake_read_fd_ = -1;
  bool installed_ = false;
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
  struct sigaction old_chld_ = {};
  struct sigaction old_pipe_ = {};
};

}  // namespace zps
