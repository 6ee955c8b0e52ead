// Fusion on the worker (ZPS_FUSION_BYTES, docs/performance.md#fusion): small requests that are ready
// together for one server (one call's partitions, or the requests the priority scheduler releases at
// once) travel as one CMD_FUSED message instead of one message each. A lone request is never held
// back waiting for company. The server applies each entry exactly as the request it stands for and
// answers the sender's entries fused; the request table still tracks (and resends) each request on its
// own, so a resend goes alone and the servers' exactly-once rules (by round, by push number) hold.
//
// Pure functions, no state: called by the PushScheduler (on a caller's thread sending a fan-out, or on
// the thread whose reply released queued requests).
#pragma once

#include <functional>
#include <vector>

#include "ps/common/blob.h"
#include "worker/request_table.h"

namespace zps {

using SendFunction = std::function<Status(const RequestSpec& to, std::vector<Blob> frames)>;

// What may be fused: requests for partitions below `bytes` (ZPS_FUSION_BYTES; 0: none), bound for a
// server that `accepts` fused messages (said so in its HELLO reply, ServerLinks::acceptsFused; unset:
// every server).
struct FusionPolicy {
  size_t bytes = 0;
  std::function<bool(int server)> accepts;
};

// Sends `ready` through `send`. Requests whose to.fuse_bytes is set and below policy.bytes, for a
// server that accepts fused messages, are grouped per server (and connection: scheduled pushes apart,
// for the push lane) into messages of at most policy.bytes (counting each one's fuse_bytes) and
// wire::kMaxFusedEntries entries, each key at most once per message (a key's second request goes in a
// later message, so a key's requests keep their order); a group of one goes as it is. The others go
// first, unchanged, in order. Returns the first failed send's status; the rest are still sent.
Status sendReady(std::vector<ReadyRequest> ready, const FusionPolicy& policy, const SendFunction& send);

// The CMD_FUSED message of `group` (requests to one server, built by RequestTable::newRequest and the
// codec's encodeBody): their bodies as entries, their payloads copied back to back.
StatusOr<std::vector<Blob>> fuseRequests(const std::vector<ReadyRequest*>& group);

}  // namespace zps
