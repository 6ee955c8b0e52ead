// The server's answers: what a store or the dispatcher sends back (Outgoing), and the builders of the
// answers every request may get (a Reply, an Error, the stats answer), each echoing the request's
// id, key and round so the worker can match it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/common/blob.h"
#include "ps/transport/transport.h"

namespace zps {

struct Outgoing {
  PeerId peer = 0;
  pb::Data data;
  Blob payload;  // empty when the answer carries none
};

// What one engine's stores took in and added, for CMD_STATS (zps bench's server CPU per byte and
// summation speed). Written by the engine's thread, read by the dispatcher. Additions are timed only
// once a worker has asked for these numbers (`timed`), so a job that never asks reads no clock per sum.
struct SumCounts {
  std::atomic<uint64_t> pushed_bytes{0};
  std::atomic<uint64_t> summed_bytes{0};  // timed additions only
  std::atomic<uint64_t> sum_ns{0};
  std::atomic<bool> timed{false};
};

// The answer to a STATS request: this process's CPU time and peak RSS, and the sum of every engine's
// counts (one SumCounts per engine). From now on those engines time their additions.
Outgoing statsReply(PeerId peer, const pb::Data& request, const std::vector<SumCounts*>& counts);

// An Error answering `request`: its id, key and round, and what went wrong (cut to 4000 bytes).
Outgoing errorReply(PeerId peer, const pb::Data& request, const std::string& error);
// A Reply to `request`, echoing its id, key, round and dtype; the caller adds the size of a payload.
Outgoing replyTo(PeerId peer, const pb::Data& request);

}  // namespace zps
