// IncomingPeers: the PeerIds that a ZeroMQ transport's listener gives the connections that send to it,
// found by their ZeroMQ routing id, and the forgetting of them (Transport::forget). A forgotten peer's
// next message makes a new peer at once, while the old id stays sendable (for replies to messages the
// role has not handled yet) until kRecentlyForgotten later forgets push it out.
//
// Owned by the ZmqTransport; used by its I/O thread only.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include "ps/transport/transport.h"

namespace zps {

class IncomingPeers {
 public:
  // Incoming peers remembered at once (a routing id and a name, about 100 bytes each); messages from
  // new connections past it are dropped until refused peers are forgotten.
  static constexpr size_t kMaxIncomingPeers = 65536;
  // Forgotten peers that can still be sent to.
  static constexpr size_t kRecentlyForgotten = 1024;

  // The peer whose messages carry `routing_id`, if it is known and not forgotten.
  std::optional<PeerId> find(const std::string& routing_id) const;
  // True when no new peer can be added.
  bool full() const { return peer_of_routing_id_.size() >= kMaxIncomingPeers; }
  // `peer` is the new connection with `routing_id`.
  void add(const std::string& routing_id, PeerId peer);
  // The routing id to send to `peer`; null when `peer` is not (or no longer) an incoming peer.
  const std::string* routingIdOf(PeerId peer) const;
  // Forgets `peer`; returns the peer that this pushed out of the recently forgotten ones (it can no
  // longer be sent to: its name may go too), if any.
  std::optional<PeerId> forget(PeerId peer);

 private:
  std::unordered_map<std::string, PeerId> peer_of_routing_id_;
  std::unordered_map<PeerId, std::string> routing_ids_;
  std::deque<PeerId> forgotten_;  // oldest first
};

}  // namespace zps
