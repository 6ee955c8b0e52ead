// The scheduler role's one object (scheduler/scheduler.h runs it): its state and what it does on its
// thread. Private to the scheduler room: scheduler.cc holds the job's loop, liveness, barriers and end,
// scheduler_registration.cc how nodes register and get the address book.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "ps/common/config.h"
#include "ps/common/log_limiter.h"
#include "ps/node/auth.h"
#include "ps/node/metrics.h"
#include "ps/transport/transport.h"
#include "ps/wire/codec.h"
#include "scheduler/barrier_table.h"
#include "scheduler/job_end.h"
#include "scheduler/job_rebuild.h"
#include "scheduler/membership.h"
#include "scheduler/status_board.h"

namespace zps::scheduler_role {

using Clock = std::chrono::steady_clock;

class Scheduler {
 public:
  Scheduler(const Config& config, Authenticator auth);

  int run();

 private:
  // Rendezvous, the running job and its end; returns the scheduler's exit code.
  int loop();

  void send(PeerId peer, const pb::Control& c) { (void)transport_->send(peer, wire::encodeControl(c)); }

  // Replies once and forgets the connection, so a peer repeating a refused registration costs a
  // queued reply (bounded by max_queued_replies) and, now and then, a log line.
  void refuse(PeerId peer, const std::string& why);

  // The transport forgets a connection that is neither a member nor a waiting replacement.
  void forgetStranger(PeerId peer);

  void handleRegister(PeerId peer, const pb::Register& reg);

  // Adds a node whose registration passed the checks. In a running job (recovery) it must take a lost
  // node's slot; one that asks for a rank whose holder still looks alive waits for the holder's verdict.
  void admit(PeerId peer, const pb::Register& reg);

  void startJob();

  // ZPS_RECOVERY: a node that held a rank before this scheduler started registers again; the job it
  // belongs to resumes where the nodes say it is.
  void noteRejoin(const pb::Register& reg);

  // A member registers again from a new connection (it re-resolved our address, or its first
  // connection was forgotten). The same process (host, port, pid, host name) keeps its rank; anything
  // else is a replacement.
  bool rebind(PeerId peer, const pb::Register& reg);

  pb::RegisterReply book() const;

  void sendBook();

  void sendBookTo(const Member& m, const pb::RegisterReply& all);
  void sendBookTo(const Member& m) { sendBookTo(m, book()); }

  // ZPS_RECOVERY: removes a lost node, holds its rank open and tells everyone to start a new generation.
  // Without recovery (or when some worker has already finished, so the job cannot be redone) the job
  // ends naming the node. Returns an exit code when the job ends, else -1.
  int lose(PeerId peer, const std::string& why);

  size_t groupSize(pb::BarrierGroup g) const;

  pb::Control barrierRelease(pb::BarrierGroup group) const;

  void handleBarrier(const Member& m, const pb::Barrier& b);

  void handleFinished(const Member& m, const pb::Finished& f);

  bool allFinished() const { return static_cast<int>(finished_.size()) == config_.num_workers; }

  void handle(PeerId peer, const pb::Control& c);

  // Returns an exit code when the job must end, else -1.
  int checkLiveness(Clock::time_point now);

  int endJob(int code, const std::string& reason);

  // A snapshot of membership for zps status and the dashboard (HTTP threads never touch membership_).
  void publishStatus(bool force);

  const Config config_;
  const Authenticator auth_;
  NonceCache nonces_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<metrics::ScopedCallback> refused_metric_;  // reads transport_
  LogLimiter refusal_log_;
  wire::Limits limits_;
  Membership membership_;
  BarrierTable barriers_;
  std::map<PeerId, Clock::time_point> last_seen_;
  std::set<PeerId> finished_;
  std::set<PeerId> gone_;        // members declared dead: the end does not wait for them
  std::unique_ptr<JobEnd> end_;  // set when the job ends
  // Recovery: the generation (lost nodes so far), whether a rank is held open, until when, for whom.
  uint64_t generation_ = 0;
  bool recovering_ = false;
  Clock::time_point recovery_deadline_;
  std::string lost_;
  struct Parked {
    pb::Register reg;
    Clock::time_point last_seen;
  };
  std::map<PeerId, Parked> parked_;  // replacements waiting for the node they replace to be declared dead
  JobRebuild rebuild_;               // a restarted scheduler rebuilding a running job from its nodes
  Clock::time_point start_;
  Clock::time_point next_liveness_check_;
  bool running_ = false;
  int exit_code_ = -1;
  std::atomic<uint64_t> malformed_{0};  // read by the metrics endpoint's thread
  SchedulerObserver obs_;               // last: its HTTP threads stop before the rest goes away
};

}  // namespace zps::scheduler_role
