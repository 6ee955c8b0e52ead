// How workers connect to a server (server/server_role.h): a HELLO is checked (protocol, token proof,
// rank), answered with the server's ipc name and tokens, and binds the connection to the worker; a
// HELLO on the ipc socket or a lane presents its token; strangers are refused and forgotten.
#include <glog/logging.h>

#include "server/server_role.h"

namespace zps::server_role {

void Server::refuseHello(PeerId peer, const pb::DataHeader& h, const std::string& why) {
  reply(peer, errorReply(peer, h, why));
  forgetStranger(peer);
}

void Server::forgetStranger(PeerId peer) {
  if (worker_of_peer_.count(peer) == 0) transport_->forget(peer);
}

void Server::hello(PeerId peer, const pb::DataHeader& h) {
  if (h.magic() != wire::kMagic || h.protocol_version() != wire::kProtocolVersion) {
    ++malformed_;
    LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": HELLO with a wrong magic or protocol version from "
                             << transport_->describe(peer);
    refuseHello(peer, h,
                "protocol mismatch: the worker speaks zps protocol version " + std::to_string(h.protocol_version()) +
                    ", this server version " + std::to_string(wire::kProtocolVersion) +
                    "; run the same zps release on every node");
    return;
  }
  // A resend of the HELLO this connection was answered for (its reply was lost, or a copy of the
  // request arrived twice: the same bytes, nonce and MAC included) gets that answer again, with the
  // same tokens, so a worker moves to ipc whichever copy it heard; the same nonce from any other
  // connection stays a replay (checkPeerProof).
  if (auto answered = hello_answer_of_peer_.find(peer);
      answered != hello_answer_of_peer_.end() && answered->second.request == h.SerializeAsString()) {
    Outgoing again;
    again.header = answered->second.reply;
    reply(peer, std::move(again));
    return;
  }
  if (auth_.enabled()) {
    Status proof =
        checkPeerProof(auth_, nonces_, kHelloContext, helloMacInput(h), h.auth_nonce(), h.auth_time_ms(), h.auth_mac());
    if (!proof.ok()) {
      ++malformed_;
      LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused HELLO from " << transport_->describe(peer) << ": "
                               << proof.message();
      refuseHello(peer, h, proof.message());
      return;
    }
  }
  int rank = h.worker_rank();
  if (rank < 0 || rank >= config_.num_workers) {
    ++malformed_;
    refuseHello(peer, h, "worker rank " + std::to_string(rank) + " is out of range");
    return;
  }
  // A worker moving to the ipc socket presents the token its TCP connection was given: that
  // connection's rank may connect twice.
  bool moving = false;
  if (h.upgrade_token() != 0) {
    for (auto it = upgrade_token_of_peer_.begin(); it != upgrade_token_of_peer_.end(); ++it) {
      if (it->second != h.upgrade_token() || worker_of_peer_[it->first] != rank ||
          local_rank_of_peer_[it->first] != h.local_rank())
        continue;
      upgrade_token_of_peer_.erase(it);
      moving = true;
      break;
    }
    if (!moving) {
      ++malformed_;
      refuseHello(peer, h, "unknown connection token");
      return;
    }
  }
  const bool lane = h.lane_token() != 0;
  if (lane && !acceptLane(peer, h, rank, moving)) return;
  // The local ranks of one worker node share its rank (each pushes its own keys); a repeat of
  // both is a misconfigured or hostile peer.
  for (auto& [p, r] : worker_of_peer_) {
    if (!moving && !lane && r == rank && p != peer && local_rank_of_peer_[p] == h.local_rank()) {
      refuseHello(peer, h,
                  "worker rank " + std::to_string(rank) + " local rank " + std::to_string(h.local_rank()) +
                      " is already connected");
      return;
    }
  }
  worker_of_peer_[peer] = rank;
  local_rank_of_peer_[peer] = h.local_rank();
  VLOG(1) << "server " << rank_ << ": worker " << rank << " connected from " << transport_->describe(peer);
  Outgoing o;
  o.header.set_command(pb::CMD_REPLY);
  o.header.set_request_id(h.request_id());
  if (auth_.enabled()) o.header.set_auth_mac(auth_.mac(kHelloReplyContext, h.auth_nonce()));
  o.header.set_accepts_fused(true);  // server/fused_messages.h
  if (!moving && !lane && !ipc_name_.empty()) {
    const uint64_t token = newToken();
    upgrade_token_of_peer_[peer] = token;
    o.header.set_ipc_name(ipc_name_);
    o.header.set_upgrade_token(token);
  }
  // Every worker connection may open one push lane; a lane opens none.
  if (!lane && has_lane_.count(peer) == 0) {
    const uint64_t token = newToken();
    lane_token_of_peer_[peer] = token;
    o.header.set_lane_token(token);
  }
  hello_answer_of_peer_[peer] = HelloAnswer{h.SerializeAsString(), o.header};
  reply(peer, std::move(o));
}

bool Server::acceptLane(PeerId peer, const pb::DataHeader& h, int rank, bool moving) {
  std::string why;
  if (moving) {
    why = "a HELLO may move a connection to ipc or open a lane, not both";
  } else {
    for (auto it = lane_token_of_peer_.begin(); it != lane_token_of_peer_.end(); ++it) {
      if (it->second != h.lane_token() || it->first == peer || worker_of_peer_[it->first] != rank ||
          local_rank_of_peer_[it->first] != h.local_rank())
        continue;
      has_lane_.insert(it->first);
      lane_token_of_peer_.erase(it);
      return true;
    }
    why = "unknown lane token: no connection of worker " + std::to_string(rank) + " local rank " +
          std::to_string(h.local_rank()) + " was given it, or it has opened its lane already";
  }
  ++malformed_;
  LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused a lane HELLO from " << transport_->describe(peer) << ": "
                           << why;
  refuseHello(peer, h, why);
  return false;
}

uint64_t Server::newToken() {
  uint64_t token = 0;
  while (token == 0) std::memcpy(&token, Authenticator::newNonce().data(), sizeof(token));
  return token;
}

}  // namespace zps::server_role
