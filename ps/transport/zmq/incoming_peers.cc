#include "ps/transport/zmq/incoming_peers.h"

namespace zps {

std::optional<PeerId> IncomingPeers::find(const std::string& routing_id) const {
  auto it = peer_of_routing_id_.find(routing_id);
  if (it == peer_of_routing_id_.end()) return std::nullopt;
  return it->second;
}

void IncomingPeers::add(const std::string& routing_id, PeerId peer) {
  peer_of_routing_id_[routing_id] = peer;
  routing_ids_[peer] = routing_id;
}

const std::string* IncomingPeers::routingIdOf(PeerId peer) const {
  auto it = routing_ids_.find(peer);
  return it == routing_ids_.end() ? nullptr : &it->second;
}

std::optional<PeerId> IncomingPeers::forget(PeerId peer) {
  auto it = routing_ids_.find(peer);
  if (it == routing_ids_.end()) return std::nullopt;
  if (auto current = peer_of_routing_id_.find(it->second);
      current != peer_of_routing_id_.end() && current->second == peer)
    peer_of_routing_id_.erase(current);
  forgotten_.push_back(peer);
  if (forgotten_.size() <= kRecentlyForgotten) return std::nullopt;
  PeerId oldest = forgotten_.front();
  forgotten_.pop_front();
  routing_ids_.erase(oldest);
  return oldest;
}

}  // namespace zps
