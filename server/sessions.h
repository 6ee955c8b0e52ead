// Sessions: the workers' connections to one server, one Session per connection that a HELLO bound,
// and decideHello, the pure check of what a HELLO (past its protocol and token proof) may do.
//
// A worker node connects once per local rank; each connection may, with the tokens the server's
// HELLO reply gave it, move to the server's ipc socket once (a second HELLO there that presents the
// upgrade token) and open one push lane (a HELLO on a second connection that presents the lane
// token). Anything else with the same worker rank and local rank is a misconfigured or hostile peer.
// Used by the dispatcher's thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "proto/zps.pb.h"
#include "ps/transport/transport.h"

namespace zps::server_role {

struct Session {
  int worker = -1;
  uint32_t local_rank = 0;
  uint64_t upgrade_token = 0;  // not 0: this connection may move to the ipc socket with it (once)
  uint64_t lane_token = 0;     // not 0: a second connection may become this one's push lane with it
  bool lane_opened = false;    // this connection's lane is open (or it is a lane itself)
  // The HELLO that bound the connection (serialized, as received) and its answer, so that a resend or
  // a duplicate of it is answered again with the same tokens.
  std::string hello_request;
  pb::Data hello_reply;
};

// What a HELLO asks, read from its body.
struct HelloRequest {
  int worker = -1;
  uint32_t local_rank = 0;
  uint64_t upgrade_token = 0;  // moving to ipc
  uint64_t lane_token = 0;     // opening a push lane
};

// What decideHello allows: refused (`why` says why), or a new session, which `moved_from` (the
// connection whose upgrade token it presented) or `lane_of` (whose lane token) qualify.
struct HelloDecision {
  std::string why;  // empty: accepted
  std::optional<PeerId> moved_from;
  std::optional<PeerId> lane_of;

  bool accepted() const { return why.empty(); }
};

class Sessions {
 public:
  Session* find(PeerId peer);
  bool contains(PeerId peer) const { return by_peer_.count(peer) > 0; }
  // The local rank of a bound connection (0 for any other).
  uint32_t localRankOf(PeerId peer) const;

  // Pure: what a HELLO of `peer` that asks `r` may do in a job of `num_workers` workers, given the
  // sessions bound so far. Changes nothing.
  HelloDecision decideHello(PeerId peer, const HelloRequest& r, int num_workers) const;
  // Binds `peer` as decided (accepted only) and uses up the token it presented; returns its session.
  Session& bind(PeerId peer, const HelloRequest& r, const HelloDecision& d);

  // A new generation: every connection says HELLO again.
  void clear() { by_peer_.clear(); }

 private:
  std::unordered_map<PeerId, Session> by_peer_;
};

}  // namespace zps::server_role
