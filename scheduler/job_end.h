// JobEnd: the end of a job after the scheduler has sent every node its Shutdown. The scheduler does not
// exit at once: it waits until every node it told has acknowledged (ShutdownAck) or a short linger
// passed, and answers every message that arrives meanwhile with the Shutdown again. So a node whose
// Shutdown was lost to a connection reset hears it when it registers again or sends its next heartbeat,
// and a node that registers with a job that has already ended is told so, instead of waiting for the
// heartbeat timeout.
//
// Created by the scheduler's logic thread when the job ends, used by that thread only, and gone when
// the scheduler returns.
#pragma once

#include <chrono>
#include <set>
#include <string>

#include "proto/zps.pb.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "scheduler/membership.h"

namespace zps {

class JobEnd {
 public:
  using Clock = std::chrono::steady_clock;

  // `awaiting`: the members that were sent the Shutdown and are expected to acknowledge it.
  JobEnd(int exit_code, const std::string& reason, std::set<PeerId> awaiting);

  const pb::Control& shutdown() const { return shutdown_; }
  bool acknowledged() const { return awaiting_.empty(); }

  // A message from `peer` after the end. Returns true when `peer` must be sent the Shutdown (again):
  // anything but an acknowledgement or a goodbye. A member that registers again from a new connection
  // is awaited on that one.
  bool answer(PeerId peer, const pb::Control& c, const Membership& membership);

  // "server 1 (host:port, pid 42)": the members that have not acknowledged yet.
  std::string waitingFor(const Membership& membership) const;

  // How long linger() waits: two heartbeat intervals, at least 5 s; after a termination signal at most
  // kSignalLinger, so that the linger and the transport's final flush (ZPS_SHUTDOWN_LINGER, 1 s) fit in
  // the 5 s that `zps launch` grants a process it has sent SIGTERM before it sends SIGKILL.
  static constexpr std::chrono::milliseconds kSignalLinger{3000};
  static std::chrono::milliseconds lingerFor(std::chrono::milliseconds heartbeat_interval, bool signalled);

  // Receives and answers until every awaited node acknowledged or `linger_for` passed; logs which.
  // `limits` bound what late messages may hold, as for every message the scheduler reads.
  void linger(Transport* transport, const Membership& membership, const wire::Limits& limits,
              std::chrono::milliseconds linger_for);

 private:
  pb::Control shutdown_;
  std::set<PeerId> awaiting_;
};

}  // namespace zps
