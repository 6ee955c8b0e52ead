#include "ps/node/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace zps {
namespace {

std::atomic<int> g_signal{0};

void onTermination(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) _exit(128 + sig);  // the second signal: no grace
}

}  // namespace

void installTerminationHandler() {
  struct sigaction sa = {};
  sa.sa_handler = onTermination;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

bool terminationRequested() { return g_signal.load() != 0; }
int terminationSignal() { return g_signal.load(); }

}  // namespace zps
