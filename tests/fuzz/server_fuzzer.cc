// Fuzz target: what a server does with the data messages that pass the codec. The codec checks
// each message on its own; whether a push matches its key's declaration, whether a round is open,
// whether rows exist, is the stores' job (server/sum_store.h, param_store.h), and a hostile or
// confused worker must cost a message there too, never the process.
//
// One input is a conversation with one server: a sequence of records
//   [worker byte][2-byte little-endian length][one message in splitFrames's layout (fuzz_util.h)]
// Each message is decoded as the server decodes it, then routed as Server::dispatch and the engine
// do (HELLO, REPLY and ERROR never reach the stores; row commands, CHECKPOINT and param DECLAREs go
// to the ParamStore, the rest to the SumStore), from worker (byte % 2) of a 2-worker job.
//
// Limits are tighter than production (64 KiB payloads, 256-float rows): a DECLARE may make the
// stores allocate what the header promises, and at the real 1 GiB limit one such message would end
// the fuzzer on memory instead of finding bugs (the server memory cap is its own work item).
//
// Checks, beyond no crash, leak or UB: every reply the stores produce decodes under the production
// limits, as the worker receiving it will decode it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kernels/reducer.h"
#include "ps/wire/codec.h"
#include "server/param_store.h"
#include "server/sum_store.h"
#include "tests/fuzz/fuzz_util.h"

namespace zps::fuzz {
namespace {

constexpr int kWorkers = 2;

wire::Limits serverLimits() {
  wire::Limits l;
  l.max_payload_bytes = 64 << 10;
  l.max_row_dim = 256;
  return l;
}

bool toParamStore(const pb::Data& d) {
  return d.has_rows() || d.has_checkpoint() || (d.has_declare() && d.declare().mode() == pb::MODE_PARAM);
}

void checkReply(const Outgoing& o) {
  ZPS_FUZZ_CHECK(wire::commandOf(o.data) == pb::CMD_REPLY || wire::commandOf(o.data) == pb::CMD_ERROR);
  auto decoded = wire::decode(wire::encodeData(o.data, o.payload), wire::Limits());
  if (!decoded.ok()) {
    std::fprintf(stderr, "server reply does not decode: %s\n", decoded.status().message().c_str());
  }
  ZPS_FUZZ_CHECK(decoded.ok());
}

}  // namespace
}  // namespace zps::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zps;
  fuzz::quietLogging();
  static const std::unique_ptr<kernels::Reducer> reducer = kernels::makeCpuReducer();
  static const wire::Limits limits = fuzz::serverLimits();
  // CHECKPOINT writes shards here (and DECLARE with restore_step reads them); one input's shards
  // must not change what the next input does.
  static const std::string dir = fuzz::ScratchDir::path() + "/server";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);

  SumStore sums(fuzz::kWorkers, reducer.get());
  ParamStore params(fuzz::kWorkers, ShardPlace{dir, /*server_rank=*/0, /*num_servers=*/1, /*job_id=*/0});
  std::vector<Outgoing> out;
  size_t pos = 0;
  while (size - pos >= 3) {
    const int worker = data[pos] % fuzz::kWorkers;
    const size_t len = std::min<size_t>(data[pos + 1] | (size_t{data[pos + 2]} << 8), size - pos - 3);
    const uint8_t* msg = data + pos + 3;
    pos += 3 + len;

    auto decoded = wire::decode(fuzz::splitFrames(msg, len), limits);
    if (!decoded.ok()) continue;
    auto* m = std::get_if<wire::DataMessage>(&*decoded);
    if (m == nullptr) continue;
    const auto cmd = wire::commandOf(m->data);
    if (cmd == pb::CMD_HELLO || cmd == pb::CMD_REPLY || cmd == pb::CMD_ERROR) continue;
    out.clear();
    const PeerId peer = 100 + worker;
    if (fuzz::toParamStore(m->data)) {
      params.handle(peer, worker, 0, *m, &out);
    } else {
      sums.handle(peer, worker, *m, &out);
    }
    for (const Outgoing& o : out) fuzz::checkReply(o);
  }
  return 0;
}
