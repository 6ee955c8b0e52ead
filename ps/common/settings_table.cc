// The table of every setting: the constants of settings/*.h, in the order help and docs print them
// (grouped by heading). A constant missing here has no flag, help or docs row (a unit test compares
// this list with the constants the headers declare).
#include <functional>

#include "ps/common/settings.h"

namespace zps {
namespace {

constexpr std::reference_wrapper<const Setting> kTable[] = {
    settings::kRole,
    settings::kRootUri,
    settings::kRootPort,
    settings::kNumServers,
    settings::kNumWorkers,
    settings::kNodeHost,
    settings::kBindHost,
    settings::kInterface,
    settings::kNodePort,
    settings::kVerbose,
    settings::kHostname,
    settings::kWorkerRank,
    settings::kServerId,
    settings::kRendezvousTimeout,
    settings::kJobEndTimeout,
    settings::kRendezvousLogInterval,
    settings::kConnectTimeout,
    settings::kHeartbeatInterval,
    settings::kHeartbeatTimeout,
    settings::kRequestTimeout,
    settings::kResendTimeout,
    settings::kPsResend,
    settings::kPsResendTimeout,
    settings::kShutdownLinger,
    settings::kPartitionBytes,
    settings::kMaxMessageBytes,
    settings::kIpc,
    settings::kFusionBytes,
    settings::kPriority,
    settings::kCreditBytes,
    settings::kPushLane,
    settings::kPushHints,
    settings::kPushPacingBytes,
    settings::kSkipZeros,
    settings::kServerEngine,
    settings::kServerEngineThreads,
    settings::kServerMaxBytes,
    settings::kTableMemoryBytes,
    settings::kTableRowFormat,
    settings::kCheckpointDir,
    settings::kCheckpointEvery,
    settings::kTableCheckpointIncrements,
    settings::kRecovery,
    settings::kRecoveryTimeout,
    settings::kEnableAsync,
    settings::kLocalSize,
    settings::kLocalRank,
    settings::kLocalReduce,
    settings::kShmDir,
    settings::kCompressor,
    settings::kCompressRatio,
    settings::kMinCompressBytes,
    settings::kTorchBucketBytes,
    settings::kAuthToken,
    settings::kAuthTokenFile,
    settings::kCurve,
    settings::kMetricsPort,
    settings::kMetricsHost,
    settings::kTraceOn,
    settings::kTraceStartStep,
    settings::kTraceEndStep,
    settings::kTraceDir,
    settings::kTestFaults,
    settings::kTestLocalCrash,
    settings::kTestLocalSlowExit,
};

// Every row is valid (its default a value of its type and range, see validSetting), and no two
// share a name, which is the flag's and the C API's key: checked by the compiler.
consteval bool validTable() {
  for (size_t i = 0; i < std::size(kTable); ++i) {
    validSetting(kTable[i]);
    for (size_t j = 0; j < i; ++j) {
      if (kTable[i].get().name == kTable[j].get().name) throw "two settings share a name";
    }
  }
  return true;
}
static_assert(validTable());

}  // namespace

std::span<const std::reference_wrapper<const Setting>> settingsTable() { return kTable; }

}  // namespace zps
