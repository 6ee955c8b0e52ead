#include "server/sessions.h"

#include <string>

namespace zps::server_role {

Session* Sessions::find(PeerId peer) {
  auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? nullptr : &it->second;
}

uint32_t Sessions::localRankOf(PeerId peer) const {
  auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? 0 : it->second.local_rank;
}

HelloDecision Sessions::decideHello(PeerId peer, const HelloRequest& r, int num_workers) const {
  HelloDecision d;
  if (r.worker < 0 || r.worker >= num_workers) {
    d.why = "worker rank " + std::to_string(r.worker) + " is out of range";
    return d;
  }
  auto same_worker = [&](const Session& s) { return s.worker == r.worker && s.local_rank == r.local_rank; };
  // A worker moving to the ipc socket presents the token its TCP connection was given: that
  // connection's rank may connect twice.
  if (r.upgrade_token != 0) {
    for (const auto& [p, s] : by_peer_) {
      if (s.upgrade_token == r.upgrade_token && same_worker(s)) d.moved_from = p;
    }
    if (!d.moved_from) {
      d.why = "unknown connection token";
      return d;
    }
  }
  if (r.lane_token != 0) {
    if (d.moved_from) {
      d.why = "a HELLO may move a connection to ipc or open a lane, not both";
      return d;
    }
    for (const auto& [p, s] : by_peer_) {
      if (p != peer && s.lane_token == r.lane_token && same_worker(s)) d.lane_of = p;
    }
    if (!d.lane_of) {
      d.why = "unknown lane token: no connection of worker " + std::to_string(r.worker) + " local rank " +
              std::to_string(r.local_rank) + " was given it, or it has opened its lane already";
      return d;
    }
  }
  if (!d.moved_from && !d.lane_of) {
    // The local ranks of one worker node share its rank (each pushes its own keys); a repeat of both
    // is a misconfigured or hostile peer.
    for (const auto& [p, s] : by_peer_) {
      if (p != peer && same_worker(s)) {
        d.why = "worker rank " + std::to_string(r.worker) + " local rank " + std::to_string(r.local_rank) +
                " is already connected";
        return d;
      }
    }
  }
  return d;
}

Session& Sessions::bind(PeerId peer, const HelloRequest& r, const HelloDecision& d) {
  if (d.moved_from) by_peer_[*d.moved_from].upgrade_token = 0;
  if (d.lane_of) {
    Session& owner = by_peer_[*d.lane_of];
    owner.lane_token = 0;
    owner.lane_opened = true;
  }
  Session& s = by_peer_[peer];
  s.worker = r.worker;
  s.local_rank = r.local_rank;
  // A lane opens no lane of its own.
  if (d.lane_of) s.lane_opened = true;
  return s;
}

}  // namespace zps::server_role
