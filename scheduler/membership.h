// Membership: who has registered with the scheduler, and the rank each node gets. Pure logic (no
// sockets, no clock), owned by the scheduler's single logic thread; unit-tested directly.
//
// Rank rules: a node that asks for a rank (DMLC_WORKER_ID and friends) gets exactly that rank or is
// refused (out of range, or taken by another node). Nodes that ask for none are given the lowest free
// ranks in arrival order once every expected node is in. With ZPS_RECOVERY a lost node is removed and a
// replacement takes its rank: the one it asks for, or, in arrival order, the only one free.
#pragma once

#include <string>
#include <vector>

#include "proto/zps.pb.h"
#include "ps/transport/transport.h"
#include "zps/status.h"

namespace zps {

struct Member {
  PeerId peer = 0;
  pb::Role role = pb::ROLE_UNSPECIFIED;
  int requested_rank = -1;
  std::string rank_source;
  int rank = -1;  // final rank; set by assignRanks() for arrival-order nodes
  std::string host;
  int port = 0;
  std::string hostname;
  int pid = 0;
  std::string auth_nonce;  // the scheduler answers with a MAC over it (ZPS_AUTH_TOKEN)
  std::string data_salt;   // a server's (Register.data_salt), for the address book

  std::string describe() const;  // "worker 1 (host:port, pid 42, host name x)"
};

// The member and the registration come from one process (host, port, pid, host name): a node that
// registers again from a new connection, not a replacement.
bool isSameProcess(const Member& m, const pb::Register& reg);

class Membership {
 public:
  static constexpr size_t kMaxDataSaltBytes = 64;

  Membership(int num_servers, int num_workers);

  // Adds a registering node; kFailedPrecondition with a message for the node when it is refused.
  Status add(PeerId peer, const pb::Register& reg);
  // Forgets a node (it went silent before the job started).
  void remove(PeerId peer);
  // The node of `from` registered again from connection `to` (proving the token with `auth_nonce`).
  void rebind(PeerId from, PeerId to, const std::string& auth_nonce);

  bool complete() const;
  // Gives arrival-order nodes without a rank the lowest free ranks; ranks already given stay. Call
  // when complete() is true (again, after a replacement took a lost node's slot).
  void assignRanks();

  const Member* find(PeerId peer) const;
  // The member that holds (or asked for) `rank` of `role`, if any.
  const Member* holder(pb::Role role, int rank) const;
  const std::vector<Member>& members() const { return members_; }
  int expected(pb::Role role) const { return role == pb::SERVER ? num_servers_ : num_workers_; }
  int registered(pb::Role role) const;

  // "1/2 servers, 2/3 workers registered; missing: worker rank 1, 1 server (rank not fixed)"
  std::string report() const;

 private:
  const int num_servers_;
  const int num_workers_;
  std::vector<Member> members_;  // in arrival order
};

}  // namespace zps
