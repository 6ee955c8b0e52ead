// Fused messages on the server (CMD_FUSED, docs/performance.md#fusion): a worker sends several small
// requests for one server as one message, the server applies each entry exactly as the request it
// stands for (same store, same exactly-once rules, an error answer of its own), and the answers that
// go back to that worker travel fused too. These are the pieces the dispatcher uses; pure functions,
// no threads: called by the server's dispatcher (the transport's I/O thread) only.
#pragma once

#include <utility>
#include <vector>

#include "ps/wire/codec.h"
#include "server/sum_store.h"

namespace zps {

// The most payload bytes one fused reply carries; more answers go in further messages.
inline constexpr size_t kMaxFusedReplyBytes = size_t{1} << 20;

// A decoded entry as the single request it stands for. Its payload becomes a buffer of its own
// (aligned, and the store's alone: a round's first push becomes its sum in place), not a slice of
// the frame that all entries share.
wire::DataMessage entryAsRequest(wire::DataMessage entry);

// The answers produced while handling one fused message from `sender`: two or more to `sender` go
// as CMD_FUSED replies (at most kMaxFusedEntries entries and kMaxFusedReplyBytes of payload each, or
// one answer alone), every other answer (a parked pull of another worker) as it is. In the order
// they were produced per peer.
std::vector<std::pair<PeerId, std::vector<Blob>>> packReplies(PeerId sender, std::vector<Outgoing> out);

// A fused message the codec refused: an error answer to each of its entries (none when it has more
// than kMaxFusedEntries), so the worker learns why instead of timing out.
std::vector<Outgoing> refuseEntries(PeerId peer, const pb::Data& rejected, const std::string& why);

}  // namespace zps
