// How workers connect to a server (server/server_role.h): a HELLO is checked (protocol, token proof,
// rank), answered with the server's ipc name and tokens, and binds the connection to the worker; a
// HELLO on the ipc socket or a lane presents its token; strangers are refused and forgotten.
#include <glog/logging.h>

#include "server/server_role.h"

namespace zps::server_role {

void Server::refuseHello(PeerId peer, const pb::Data& hello, const std::string& why) {
  reply(peer, errorReply(peer, hello, why));
  forgetStranger(peer);
}

void Server::forgetStranger(PeerId peer) {
  if (!sessions_.contains(peer)) transport_->forget(peer);
}

void Server::hello(PeerId peer, const pb::Data& request) {
  const pb::Hello& h = request.hello();
  if (h.magic() != wire::kMagic || request.protocol_version() != wire::kProtocolVersion) {
    ++malformed_;
    LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": HELLO with a wrong magic or protocol version from "
                             << transport_->describe(peer);
    refuseHello(peer, request,
                "protocol mismatch: the worker speaks zps protocol version " +
                    std::to_string(request.protocol_version()) + ", this server version " +
                    std::to_string(wire::kProtocolVersion) + "; run the same zps release on every node");
    return;
  }
  // A resend of the HELLO this connection was answered for (its reply was lost, or a copy of the
  // request arrived twice: the same bytes, nonce and MAC included) gets that answer again, with the
  // same tokens, so a worker moves to ipc whichever copy it heard; the same nonce from any other
  // connection stays a replay (checkPeerProof).
  const std::string hello_bytes = request.SerializeAsString();
  if (const Session* s = sessions_.find(peer);
      s != nullptr && !s->hello_request.empty() && s->hello_request == hello_bytes) {
    Outgoing again;
    again.data = s->hello_reply;
    reply(peer, std::move(again));
    return;
  }
  if (auth_.enabled()) {
    Status proof = checkPeerProof(auth_, nonces_, kHelloContext, helloMacInput(h, request.protocol_version()),
                                  h.auth_nonce(), h.auth_time_ms(), h.auth_mac());
    if (!proof.ok()) {
      ++malformed_;
      LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused HELLO from " << transport_->describe(peer) << ": "
                               << proof.message();
      refuseHello(peer, request, proof.message());
      return;
    }
  }
  const HelloRequest asked{h.worker_rank(), h.local_rank(), h.upgrade_token(), h.lane_token()};
  const HelloDecision decision = sessions_.decideHello(peer, asked, config_.num_workers);
  if (!decision.accepted()) {
    ++malformed_;
    LOG_EVERY_N(WARNING, 20) << "server " << rank_ << ": refused a HELLO from " << transport_->describe(peer) << ": "
                             << decision.why;
    refuseHello(peer, request, decision.why);
    return;
  }
  Session& session = sessions_.bind(peer, asked, decision);
  VLOG(1) << "server " << rank_ << ": worker " << asked.worker << " connected from " << transport_->describe(peer);
  Outgoing o;
  o.data.set_request_id(request.request_id());
  pb::HelloReply* answer = o.data.mutable_hello_reply();
  if (auth_.enabled()) answer->set_auth_mac(auth_.mac(kHelloReplyContext, h.auth_nonce()));
  answer->set_accepts_fused(true);  // server/fused_messages.h
  if (!decision.moved_from && !decision.lane_of && !ipc_name_.empty()) {
    session.upgrade_token = newToken();
    answer->set_ipc_name(ipc_name_);
    answer->set_upgrade_token(session.upgrade_token);
  }
  // Every worker connection may open one push lane; a lane opens none.
  if (!session.lane_opened) {
    session.lane_token = newToken();
    answer->set_lane_token(session.lane_token);
  }
  session.hello_request = hello_bytes;
  session.hello_reply = o.data;
  reply(peer, std::move(o));
}

uint64_t Server::newToken() {
  uint64_t token = 0;
  while (token == 0) std::memcpy(&token, Authenticator::newNonce().data(), sizeof(token));
  return token;
}

}  // namespace zps::server_role
