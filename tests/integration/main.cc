// The integration tests' main: the zps binary and the data folder come from the build (overridable with
// ZPS_BIN and ZPS_DATA_DIR), so the tests run the same under ctest and by hand.
//
// `zps_integration_tests --null-buffer-worker` is instead a worker program of its own, for a test that
// needs a call `zps check` never makes: every local rank push-pulls one tensor for a round, and local
// rank 1 passes a null input buffer. `zps_integration_tests --late-reply-worker <server pid>` is
// the worker of cancellation_test.cc: it stops the server (SIGSTOP) during a pull, lets the wait time
// out, fills the buffer with a sentinel, resumes the server, waits for SIGUSR1 (the test sends it once
// the late reply was dropped), checks the sentinel, and pulls the round again.
// `zps_integration_tests --async-counter-worker` is the worker of exactly_once_test.cc,
// `--barrier-generation-worker` the worker of barrier_generation_test.cc, `--table-sizes-worker` the
// worker of table_sizes_test.cc.
#include <signal.h>
#include <zps/worker.h>

#include "ps/common/config.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tests/catch_session.h"

int asyncCounterWorker();       // exactly_once_test.cc
int barrierGenerationWorker();  // barrier_generation_test.cc
int tableSizesWorker();         // table_sizes_test.cc

namespace {

int nullBufferWorker() {
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "null-buffer-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  zps::Worker& w = **worker;
  std::vector<float> in(1024, 1.0f), out(1024);
  auto tensor = w.declare("null-buffer/grad", in.size() * sizeof(float), zps::DType::kFloat32);
  if (!tensor.ok()) return w.finish(tensor.status());
  auto handle = w.pushPull(*tensor, w.localRank() == 1 ? nullptr : in.data(), out.data());
  zps::Status result = handle.ok() ? w.wait(*handle) : handle.status();
  std::cerr << "null-buffer-worker local rank " << w.localRank() << ": "
            << (result.ok() ? "push-pull done" : result.message()) << std::endl;
  return w.finish(result);
}

// True once `pid` shows as stopped (state T) in /proc: SIGSTOP takes effect asynchronously.
bool stopped(pid_t pid) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto paren = line.rfind(')');
    if (paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'T') return true;
    usleep(10000);
  }
  return false;
}

int lateReplyWorker(pid_t server) {
  // Blocked before any thread starts, so that sigtimedwait below is the only receiver of SIGUSR1.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  zps::setupLogging("late-reply-worker", 1);  // PS_VERBOSE=1: the dropped reply is logged
  auto worker = zps::Worker::create();
  if (!worker.ok()) {
    std::cerr << "late-reply-worker: " << worker.status().message() << std::endl;
    return 2;
  }
  zps::Worker& w = **worker;
  auto fail = [&](const std::string& why) {
    std::cerr << "late-reply-worker: FAILED: " << why << std::endl;
    return w.finish(zps::InternalError(why));
  };
  const size_t n = 1024;
  std::vector<float> in(n), out(n);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i + 1);
  auto tensor = w.declare("late/grad", n * sizeof(float), zps::DType::kFloat32);
  if (!tensor.ok()) return fail(tensor.status().message());
  auto push = w.push(*tensor, in.data());
  if (!push.ok() || !w.wait(*push).ok()) return fail("push of round 1");

  kill(server, SIGSTOP);
  if (!stopped(server)) return fail("the server did not stop within 10 s");
  auto pull = w.pull(*tensor, out.data());
  if (!pull.ok()) return fail(pull.status().message());
  zps::Status late = w.wait(*pull, std::chrono::milliseconds(1000));
  std::cerr << "late-reply-worker: first pull: " << late.message() << std::endl;
  if (late.code() != zps::StatusCode::kDeadlineExceeded) return fail("the pull did not time out");
  const unsigned char kSentinel = 0xA5;
  std::memset(out.data(), kSentinel, n * sizeof(float));
  kill(server, SIGCONT);
  std::cerr << "late-reply-worker: server resumed" << std::endl;
  const timespec deadline{60, 0};
  if (sigtimedwait(&usr1, nullptr, &deadline) != SIGUSR1) return fail("no SIGUSR1 from the test within 60 s");
  const auto* bytes = reinterpret_cast<const unsigned char*>(out.data());
  for (size_t i = 0; i < n * sizeof(float); ++i) {
    if (bytes[i] != kSentinel) return fail("byte " + std::to_string(i) + " of the buffer changed after wait()");
  }
  std::cerr << "late-reply-worker: the buffer still holds the sentinel" << std::endl;

  pull = w.pull(*tensor, out.data());
  zps::Status again = pull.ok() ? w.wait(*pull) : pull.status();
  if (!again.ok()) return fail("second pull: " + again.message());
  if (out != in) return fail("the second pull of round 1 returned other values than the push");
  auto pushPull = w.pushPull(*tensor, in.data(), out.data());
  zps::Status next = pushPull.ok() ? w.wait(*pushPull) : pushPull.status();
  if (!next.ok() || out != in) return fail("push-pull of round 2: " + next.message());
  std::cerr << "late-reply-worker: round 1 pulled again and round 2 done" << std::endl;
  return w.finish(zps::Status::OK());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--null-buffer-worker") == 0) return nullBufferWorker();
  if (argc == 3 && std::strcmp(argv[1], "--late-reply-worker") == 0) return lateReplyWorker(std::atoi(argv[2]));
  if (argc == 2 && std::strcmp(argv[1], "--async-counter-worker") == 0) return asyncCounterWorker();
  if (argc == 2 && std::strcmp(argv[1], "--barrier-generation-worker") == 0) return barrierGenerationWorker();
  if (argc == 2 && std::strcmp(argv[1], "--table-sizes-worker") == 0) return tableSizesWorker();
  setenv("ZPS_BIN", ZPS_TEST_BIN, /*overwrite=*/0);
  setenv("ZPS_DATA_DIR", ZPS_TEST_DATA_DIR, /*overwrite=*/0);
  return zps::testing::runCatchSession(argc, argv);
}
