// The scheduler role: rendezvous, rank assignment, barriers, liveness and the end of the job. All logic
// runs on one thread (this function's); the transport's I/O thread only moves bytes.
//
// Recovery (ZPS_RECOVERY=1): a node that dies (or says goodbye) in a running job is removed and its rank
// held open for ZPS_RECOVERY_TIMEOUT. The job's generation goes up by one and every node is told
// (Recovery): workers fail their pending requests as "recovering", servers drop their keys and tables.
// A replacement that registers takes the rank (one that registers while the old node still looks
// alive waits until it is declared dead); once every rank is held again, every node gets the address
// book of the new generation, and the workers start over from the latest checkpoint.
//
// Resets and restarts: a node whose connection was reset registers again (rejoin) and is sent the
// address book again, its cue to resend what the reset may have lost. A scheduler that restarted in a
// running job (ZPS_RECOVERY) learns the job from the nodes' rejoins: their ranks, the generation and
// the barriers released so far; once every rank is held it sends the book and the job goes on.
#include "scheduler/scheduler.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>

#include "ps/common/log_limiter.h"
#include "ps/node/auth.h"
#include "ps/node/metrics.h"
#include "ps/node/observability.h"
#include "ps/node/signals.h"
#include "ps/wire/codec.h"
#include "scheduler/barrier_table.h"
#include "scheduler/job_end.h"
#include "scheduler/job_rebuild.h"
#include "scheduler/membership.h"
#include "scheduler/status_board.h"

namespace zps {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Scheduler {
 public:
  Scheduler(const Config& config, Authenticator auth)
      : config_(config),
        auth_(std::move(auth)),
        membership_(config.num_servers, config.num_workers),
        obs_(config.num_servers, config.num_workers, config.heartbeat_interval, config.heartbeat_timeout, &malformed_) {
    TransportOptions options;
    applyTransportSecurity(config, auth_, &options, SecuredLink::kScheduler);
    options.name = "scheduler";
    options.max_frame_bytes = 1 << 20;
    // Nodes read every control message at once; a peer that never reads loses its replies, not our memory.
    options.max_queued_replies = 1000;
    options.linger = config.shutdown_linger;
    transport_ = makeZmqTransport(options);
    refused_metric_ = std::make_unique<metrics::ScopedCallback>(
        "zps_refused_connections_total", "Connections refused at the ZeroMQ handshake (missing or wrong token)", true,
        [t = transport_.get()] { return static_cast<double>(t->refusedHandshakes()); });
  }

  int run() {
    // Never the DMLC_PS_ROOT_URI name: in a pod that name is a Service, which the pod cannot bind (what
    // DMLC_USE_KUBERNETES=1 asks of ps-lite, always on here); every interface unless told otherwise.
    auto port = transport_->listen(config_.bind_host, config_.root_port);
    if (!port.ok()) {
      LOG(ERROR) << "scheduler: " << port.status().message() << "; pick a free DMLC_PS_ROOT_PORT";
      return 2;
    }
    std::function<bool(const std::string&)> token_check;
    if (auth_.enabled()) token_check = [this](const std::string& t) { return auth_.matchesToken(t); };
    if (Status s = obs_.start(std::move(token_check)); !s.ok()) {
      LOG(ERROR) << "scheduler: " << s.message();
      return 2;
    }
    start_ = Clock::now();
    LOG(INFO) << "scheduler listening on " << config_.bind_host << ":" << *port << ", waiting for "
              << config_.num_servers << " servers and " << config_.num_workers << " workers (rendezvous timeout "
              << config_.rendezvous_timeout.count() / 1000.0 << " s)";
    const int code = loop();
    if (end_)
      end_->linger(transport_.get(), membership_, limits_,
                   JobEnd::lingerFor(config_.heartbeat_interval, terminationRequested()));
    transport_->close();  // flushes the last shutdowns (ZPS_SHUTDOWN_LINGER)
    return code;
  }

 private:
  // Rendezvous, the running job and its end; returns the scheduler's exit code.
  int loop() {
    auto next_report = start_ + config_.rendezvous_log_interval;
    for (;;) {
      auto now = Clock::now();
      if (!running_) {
        if (now - start_ >= config_.rendezvous_timeout && allFinished()) {
          // A rebuilt job whose workers all finished: their work is done, so the job is complete, but
          // the missing nodes cannot be told.
          return endJob(0, "job complete: all workers finished; not told (they did not register again within " +
                               secondsText(config_.rendezvous_timeout) +
                               " s, ZPS_RENDEZVOUS_TIMEOUT): " + membership_.report());
        }
        if (now - start_ >= config_.rendezvous_timeout) {
          std::string report = "rendezvous timed out after " + secondsText(config_.rendezvous_timeout) +
                               " s (ZPS_RENDEZVOUS_TIMEOUT): " + membership_.report();
          return endJob(1, report);
        }
        if (now >= next_report) {
          LOG(INFO) << "scheduler waiting " << static_cast<int>(secondsSince(start_)) << " s: " << membership_.report();
          next_report = now + config_.rendezvous_log_interval;
        }
      }
      if (terminationRequested()) {
        endJob(1, "the scheduler got signal " + std::to_string(terminationSignal()) + " and ended the job");
        return 0;  // a requested stop is not a failure of this process
      }
      if (int code = checkLiveness(now); code >= 0) return code;
      if (recovering_ && now >= recovery_deadline_) {
        return endJob(1, "node dead: " + lost_ + "; no replacement registered within " +
                             secondsText(config_.recovery_timeout) + " s (ZPS_RECOVERY_TIMEOUT)");
      }
      publishStatus(false);
      if (exit_code_ >= 0) return exit_code_;
      auto msg = transport_->recv(now + std::chrono::milliseconds(100));
      if (!msg.ok()) continue;
      auto decoded = wire::decode(msg->frames, limits_);
      if (!decoded.ok()) {
        ++malformed_;
        LOG_EVERY_N(WARNING, 20) << "scheduler: malformed message from " << transport_->describe(msg->peer) << ": "
                                 << decoded.status().message() << " (" << malformed_ << " malformed so far)";
        forgetStranger(msg->peer);
        continue;
      }
      auto* control = std::get_if<pb::Control>(&decoded.value());
      if (control == nullptr) {
        ++malformed_;
        LOG_EVERY_N(WARNING, 20) << "scheduler: data message from " << transport_->describe(msg->peer) << " ignored";
        forgetStranger(msg->peer);
        continue;
      }
      handle(msg->peer, *control);
      if (exit_code_ >= 0) return exit_code_;
    }
  }

  void send(PeerId peer, const pb::Control& c) { (void)transport_->send(peer, wire::encodeControl(c)); }

  // Replies once and forgets the connection, so a peer repeating a refused registration costs a
  // queued reply (bounded by max_queued_replies) and, now and then, a log line.
  void refuse(PeerId peer, const std::string& why) {
    if (refusal_log_.allow())
      LOG(WARNING) << "scheduler: refused a node from " << transport_->describe(peer) << ": " << why
                   << (refusal_log_.suppressed() > 0
                           ? " (" + std::to_string(refusal_log_.suppressed()) + " refusals before it not logged)"
                           : std::string());
    pb::Control c;
    c.mutable_register_reply()->set_accepted(false);
    c.mutable_register_reply()->set_error(why);
    send(peer, c);
    forgetStranger(peer);
  }

  // The transport forgets a connection that is neither a member nor a waiting replacement.
  void forgetStranger(PeerId peer) {
    if (membership_.find(peer) == nullptr && parked_.count(peer) == 0) transport_->forget(peer);
  }

  void handleRegister(PeerId peer, const pb::Register& reg) {
    if (reg.magic() != wire::kMagic || reg.protocol_version() != wire::kProtocolVersion) {
      refuse(peer, "protocol mismatch: node speaks magic " + std::to_string(reg.magic()) + " version " +
                       std::to_string(reg.protocol_version()) + ", scheduler speaks magic " +
                       std::to_string(wire::kMagic) + " version " + std::to_string(wire::kProtocolVersion));
      return;
    }
    if (const Member* m = membership_.find(peer)) {
      VLOG(1) << "scheduler: repeated registration from " << m->describe();
      // Its connection was reset: the book again tells it to resend what the reset may have lost.
      if (running_) sendBookTo(*m);
      return;
    }
    if (auth_.enabled()) {
      Status proof = checkPeerProof(auth_, nonces_, kRegisterContext, registerMacInput(reg), reg.auth_nonce(),
                                    reg.auth_time_ms(), reg.auth_mac());
      if (!proof.ok()) {
        ++malformed_;
        refuse(peer, proof.message());
        return;
      }
    }
    if (reg.rejoin() && rebind(peer, reg)) return;
    if (reg.rejoin() && running_ && reg.generation() < generation_) {
      // A node that was stopped (SIGSTOP, a frozen VM) past the heartbeat timeout, declared dead and
      // replaced, and now resumed: its rank belongs to the replacement. Told so, it ends at once with
      // the true reason, instead of waiting as a replacement of its own replacement.
      if (const Member* holder = membership_.holder(reg.role(), reg.requested_rank())) {
        refuse(peer, std::string(wire::roleName(reg.role())) + " " + std::to_string(reg.requested_rank()) + " (pid " +
                         std::to_string(reg.pid()) + ") was declared dead in generation " +
                         std::to_string(reg.generation()) + " and replaced by " + holder->describe() +
                         "; this process is no longer part of the job");
        return;
      }
    }
    if (running_ && !config_.recovery) {
      refuse(peer, "the job is already running with all nodes registered");
      return;
    }
    if (reg.rejoin() && !running_) {
      if (!config_.recovery) {
        refuse(peer,
               "this scheduler started after the job began and does not know it (with ZPS_RECOVERY=1 a restarted "
               "scheduler rebuilds the job from its nodes)");
        return;
      }
      noteRejoin(reg);
    }
    if (static_cast<int>(reg.expected_servers()) != config_.num_servers ||
        static_cast<int>(reg.expected_workers()) != config_.num_workers) {
      refuse(peer, "node expects " + std::to_string(reg.expected_servers()) + " servers and " +
                       std::to_string(reg.expected_workers()) + " workers but the scheduler expects " +
                       std::to_string(config_.num_servers) + " and " + std::to_string(config_.num_workers) +
                       "; set the same DMLC_NUM_SERVER and DMLC_NUM_WORKER everywhere");
      return;
    }
    admit(peer, reg);
  }

  // Adds a node whose registration passed the checks. In a running job (recovery) it must take a lost
  // node's slot; one that asks for a rank whose holder still looks alive waits for the holder's verdict.
  void admit(PeerId peer, const pb::Register& reg) {
    if (running_ && reg.requested_rank() >= 0) {
      if (const Member* holder = membership_.holder(reg.role(), reg.requested_rank())) {
        if (parked_.size() >= static_cast<size_t>(config_.num_servers + config_.num_workers)) {
          refuse(peer, "too many nodes are waiting to replace others");
          return;
        }
        LOG(WARNING) << "scheduler: a replacement for " << holder->describe() << " registered from "
                     << transport_->describe(peer) << "; it waits until that node is declared dead";
        parked_[peer] = Parked{reg, Clock::now()};
        return;
      }
    }
    Status s = membership_.add(peer, reg);
    if (!s.ok()) {
      refuse(peer, s.message());
      return;
    }
    if (!running_ && !reg.rejoin()) rebuild_.noteNewcomer();  // counts only if the job is being rebuilt
    last_seen_[peer] = Clock::now();
    const Member* m = membership_.find(peer);
    LOG(INFO) << "scheduler: registered " << m->describe() << " (rank from " << m->rank_source << "); "
              << membership_.report();
    if (!membership_.complete()) return;
    if (!running_) {
      startJob();
    } else if (recovering_) {
      recovering_ = false;
      lost_.clear();
      obs_.recovering(false, "");
      sendBook();
      LOG(INFO) << "scheduler: every rank is held again; address book of generation " << generation_ << " sent";
    }
  }

  void startJob() {
    if (rebuild_.active()) {
      generation_ = rebuild_.generation();
      for (int g = pb::GROUP_WORKERS; g <= pb::GROUP_ALL; ++g)
        barriers_.restore(static_cast<pb::BarrierGroup>(g), rebuild_.released(static_cast<pb::BarrierGroup>(g)));
    }
    sendBook();
    running_ = true;
    LOG(INFO) << "scheduler: all " << membership_.members().size() << " nodes registered in " << secondsSince(start_)
              << " s; address book sent"
              << (rebuild_.active()
                      ? "; the running job was rebuilt from its nodes (generation " + std::to_string(generation_) + ")"
                      : std::string());
    if (allFinished()) endJob(0, "job complete: all workers finished");
  }

  // ZPS_RECOVERY: a node that held a rank before this scheduler started registers again; the job it
  // belongs to resumes where the nodes say it is.
  void noteRejoin(const pb::Register& reg) {
    if (rebuild_.note(reg))
      LOG(WARNING) << "scheduler: a " << wire::roleName(reg.role()) << " of a running job registers again (rank "
                   << reg.requested_rank() << ", generation " << reg.generation()
                   << "): rebuilding the job from its nodes (ZPS_RECOVERY)";
  }

  // A member registers again from a new connection (it re-resolved our address, or its first
  // connection was forgotten). The same process (host, port, pid, host name) keeps its rank; anything
  // else is a replacement.
  bool rebind(PeerId peer, const pb::Register& reg) {
    const Member* m = membership_.holder(reg.role(), reg.requested_rank());
    if (m == nullptr || !isSameProcess(*m, reg)) return false;
    const PeerId old = m->peer;
    LOG(WARNING) << "scheduler: " << m->describe() << " registered again from a new connection; it keeps its rank";
    membership_.rebind(old, peer, reg.auth_nonce());
    barriers_.rebind(old, peer);
    last_seen_.erase(old);
    last_seen_[peer] = Clock::now();
    if (finished_.erase(old) > 0) finished_.insert(peer);
    transport_->forget(old);
    if (running_) sendBookTo(*membership_.find(peer));
    return true;
  }

  pb::RegisterReply book() const {
    pb::RegisterReply book;
    book.set_generation(generation_);
    book.set_accepted(true);
    book.set_heartbeat_interval_ms(static_cast<uint32_t>(config_.heartbeat_interval.count()));
    book.set_heartbeat_timeout_ms(static_cast<uint32_t>(config_.heartbeat_timeout.count()));
    for (const auto& m : membership_.members()) {
      auto* n = book.add_nodes();
      n->set_role(m.role);
      n->set_rank(m.rank);
      n->set_host(m.host);
      n->set_port(static_cast<uint32_t>(m.port));
      n->set_hostname(m.hostname);
      n->set_pid(static_cast<uint32_t>(m.pid));
      n->set_data_salt(m.data_salt);
    }
    return book;
  }

  void sendBook() {
    membership_.assignRanks();
    const pb::RegisterReply all = book();
    for (const auto& m : membership_.members()) sendBookTo(m, all);
  }

  void sendBookTo(const Member& m, const pb::RegisterReply& all) {
    pb::Control c;
    *c.mutable_register_reply() = all;
    c.mutable_register_reply()->set_rank(m.rank);
    if (auth_.enabled()) c.mutable_register_reply()->set_auth_mac(auth_.mac(kRegisterReplyContext, m.auth_nonce));
    send(m.peer, c);
  }
  void sendBookTo(const Member& m) { sendBookTo(m, book()); }

  // ZPS_RECOVERY: removes a lost node, holds its rank open and tells everyone to start a new generation.
  // Without recovery (or when some worker has already finished, so the job cannot be redone) the job
  // ends naming the node. Returns an exit code when the job ends, else -1.
  int lose(PeerId peer, const std::string& why) {
    obs_.nodeDead(peer);
    gone_.insert(peer);  // not waited for at the end
    if (!config_.recovery) return endJob(1, "node dead: " + why);
    if (!finished_.empty())
      return endJob(1,
                    "node dead: " + why + ", after a worker finished: a finished job cannot be redone (ZPS_RECOVERY)");
    membership_.remove(peer);
    last_seen_.erase(peer);
    ++generation_;
    barriers_ = BarrierTable();  // barriers count afresh in each generation
    recovering_ = true;
    recovery_deadline_ = Clock::now() + config_.recovery_timeout;
    lost_ += (lost_.empty() ? "" : "; ") + why;
    obs_.recovering(true, "generation " + std::to_string(generation_) + ": waiting for a replacement of " + lost_);
    LOG(WARNING) << "scheduler: lost " << why << "; generation " << generation_ << ": holding its rank for a "
                 << "replacement for " << config_.recovery_timeout.count() / 1000.0 << " s (ZPS_RECOVERY)";
    pb::Control c;
    c.mutable_recovery()->set_generation(generation_);
    c.mutable_recovery()->set_lost(why);
    for (const auto& m : membership_.members()) send(m.peer, c);
    // A replacement may have registered before the old node was declared dead.
    auto waiting = std::move(parked_);
    parked_.clear();
    for (auto& [p, entry] : waiting) {
      admit(p, entry.reg);
      if (exit_code_ >= 0) return exit_code_;
    }
    return -1;
  }

  size_t groupSize(pb::BarrierGroup g) const {
    if (g == pb::GROUP_WORKERS) return config_.num_workers;
    if (g == pb::GROUP_SERVERS) return config_.num_servers;
    return config_.num_workers + config_.num_servers;
  }

  pb::Control barrierRelease(pb::BarrierGroup group) const {
    pb::Control c;
    c.mutable_barrier_release()->set_group(group);
    c.mutable_barrier_release()->set_sequence(barriers_.generation(group));
    c.mutable_barrier_release()->set_generation(generation_);
    return c;
  }

  void handleBarrier(const Member& m, const pb::Barrier& b) {
    if (!running_) {
      LOG_EVERY_N(WARNING, 20) << "scheduler: barrier from " << m.describe() << " before the job started, ignored";
      return;
    }
    if (b.generation() != generation_ || recovering_) {
      VLOG(1) << "scheduler: barrier of generation " << b.generation() << " from " << m.describe() << " ignored";
      return;
    }
    if (!BarrierTable::inGroup(b.group(), m.role)) {
      LOG_EVERY_N(WARNING, 20) << "scheduler: " << m.describe() << " is not in barrier group "
                               << pb::BarrierGroup_Name(b.group()) << ", ignored";
      return;
    }
    auto result = barriers_.arrive(b.group(), m.peer, b.sequence(), groupSize(b.group()));
    if (result == BarrierTable::Result::kStale) {
      // Sent again after a reset that lost its release: the node is told again.
      send(m.peer, barrierRelease(b.group()));
      return;
    }
    if (result == BarrierTable::Result::kDuplicate || result == BarrierTable::Result::kAhead) {
      LOG_EVERY_N(WARNING, 20) << "scheduler: ignored a duplicate or out-of-order barrier " << b.sequence() << " from "
                               << m.describe();
      return;
    }
    if (result != BarrierTable::Result::kReleased) return;
    const pb::Control c = barrierRelease(b.group());
    for (const auto& other : membership_.members())
      if (BarrierTable::inGroup(b.group(), other.role)) send(other.peer, c);
    VLOG(1) << "scheduler: released barrier " << barriers_.generation(b.group()) << " of "
            << pb::BarrierGroup_Name(b.group());
  }

  void handleFinished(const Member& m, const pb::Finished& f) {
    if (m.role != pb::WORKER) {
      LOG_EVERY_N(WARNING, 20) << "scheduler: 'finished' from " << m.describe() << " ignored (not a worker)";
      return;
    }
    if (!f.ok()) {
      endJob(1, m.describe() + " failed: " + f.message());
      return;
    }
    finished_.insert(m.peer);
    LOG(INFO) << "scheduler: " << m.describe() << " finished (" << finished_.size() << "/" << config_.num_workers
              << ")";
    if (!allFinished()) return;
    if (running_) {
      endJob(0, "job complete: all workers finished");
      return;
    }
    // A rebuilt job (ZPS_RECOVERY): a node that has not registered again would never hear of the end.
    LOG(WARNING) << "scheduler: all workers finished, but the job is not rebuilt yet; ending it once every rank "
                    "has registered again (at most "
                 << secondsText(config_.rendezvous_timeout) << " s after this scheduler started, "
                 << "ZPS_RENDEZVOUS_TIMEOUT): " << membership_.report();
  }

  bool allFinished() const { return static_cast<int>(finished_.size()) == config_.num_workers; }

  void handle(PeerId peer, const pb::Control& c) {
    if (c.has_register_()) {
      handleRegister(peer, c.register_());
      return;
    }
    const Member* m = membership_.find(peer);
    if (m == nullptr && parked_.count(peer) != 0) {
      parked_[peer].last_seen = Clock::now();  // a waiting replacement's heartbeats
      return;
    }
    if (m == nullptr && c.has_heartbeat()) {
      // A node whose registration is on its way (after a reset or a restart of this scheduler, what it
      // queued meanwhile may arrive first): forgetting the connection now would make its registration,
      // right behind, a new peer and every later message a stranger's. Kept within the transport's
      // bound on incoming peers.
      VLOG(1) << "scheduler: heartbeat from unregistered " << transport_->describe(peer) << " ignored";
      return;
    }
    if (m == nullptr) {
      ++malformed_;
      LOG_EVERY_N(WARNING, 20) << "scheduler: message from unregistered " << transport_->describe(peer) << " ignored";
      forgetStranger(peer);
      return;
    }
    last_seen_[peer] = Clock::now();
    switch (c.body_case()) {
      case pb::Control::kHeartbeat: {  // the echo tells the node we are alive and what our clock says
        obs_.heartbeat(peer, c.heartbeat());
        pb::Control echo = c;
        echo.mutable_heartbeat()->set_scheduler_unix_us(unixMicros());
        send(peer, echo);
        break;
      }
      case pb::Control::kBarrier: handleBarrier(*m, c.barrier()); break;
      case pb::Control::kFinished: handleFinished(*m, c.finished()); break;
      case pb::Control::kGoodbye:
        if (!running_) {
          LOG(WARNING) << "scheduler: " << m->describe() << " left during rendezvous (" << c.goodbye().reason()
                       << "); waiting for a replacement";
          last_seen_.erase(peer);
          finished_.erase(peer);
          membership_.remove(peer);
        } else if (finished_.count(peer) == 0) {
          lose(peer, m->describe() + " left: " + c.goodbye().reason());
        }
        break;
      default: ++malformed_; LOG_EVERY_N(WARNING, 20) << "scheduler: unexpected message from " << m->describe();
    }
  }

  // Returns an exit code when the job must end, else -1.
  int checkLiveness(Clock::time_point now) {
    if (now < next_liveness_check_) return -1;
    next_liveness_check_ = now + std::chrono::milliseconds(250);
    // A node whose rank a replacement is waiting for is presumed dead after two missed heartbeats, not
    // the whole timeout: a restarted pod or process says its predecessor is gone, and the job should not
    // stall for ZPS_HEARTBEAT_TIMEOUT to learn it.
    std::set<PeerId> contested;
    for (const auto& [peer, entry] : parked_)
      if (const Member* holder = membership_.holder(entry.reg.role(), entry.reg.requested_rank()))
        contested.insert(holder->peer);
    const auto contested_timeout = std::min(config_.heartbeat_timeout, 2 * config_.heartbeat_interval);
    std::vector<PeerId> silent;
    for (const auto& m : membership_.members()) {
      if (running_ && finished_.count(m.peer) != 0) continue;
      const auto limit = contested.count(m.peer) != 0 ? contested_timeout : config_.heartbeat_timeout;
      if (now - last_seen_[m.peer] > limit) silent.push_back(m.peer);
    }
    for (PeerId p : silent) {
      const Member* m = membership_.find(p);
      const bool replaced = contested.count(p) != 0;
      std::string what = m->describe() + " sent no heartbeat for " +
                         secondsText(replaced ? contested_timeout : config_.heartbeat_timeout) + " s" +
                         (replaced ? " while a replacement waits for its rank" : "");
      if (!running_) {
        // Before the job starts a silent node is simply dropped, so a restarted pod can take its place.
        LOG(WARNING) << "scheduler: " << what << " during rendezvous; dropping it";
        membership_.remove(p);
        last_seen_.erase(p);
        finished_.erase(p);
        continue;
      }
      if (int code = lose(p, what); code >= 0) return code;
    }
    // A waiting replacement that went silent is forgotten.
    for (auto it = parked_.begin(); it != parked_.end();)
      it = now - it->second.last_seen > config_.heartbeat_timeout ? parked_.erase(it) : std::next(it);
    return -1;
  }

  int endJob(int code, const std::string& reason) {
    if (malformed_ > 0) LOG(WARNING) << "scheduler: " << malformed_ << " malformed or unexpected messages were dropped";
    if (code == 0)
      LOG(INFO) << "scheduler: " << reason << "; shutting down all nodes";
    else
      LOG(ERROR) << "scheduler: " << reason;
    obs_.jobEnded(code, reason);
    publishStatus(true);  // zps status and the dashboard show the end while the shutdowns flush
    std::set<PeerId> awaiting;
    for (const auto& m : membership_.members())
      if (gone_.count(m.peer) == 0) awaiting.insert(m.peer);
    end_ = std::make_unique<JobEnd>(code, reason, std::move(awaiting));
    for (const auto& m : membership_.members()) send(m.peer, end_->shutdown());
    for (const auto& [peer, entry] : parked_) send(peer, end_->shutdown());
    exit_code_ = code;
    return code;
  }

  // A snapshot of membership for zps status and the dashboard (HTTP threads never touch membership_).
  void publishStatus(bool force) {
    std::vector<StatusBoard::Member> rows;
    for (const auto& m : membership_.members())
      rows.push_back(StatusBoard::Member{m.peer, m.role, m.rank >= 0 ? m.rank : m.requested_rank, m.host, m.hostname,
                                         static_cast<uint32_t>(m.pid), last_seen_[m.peer],
                                         finished_.count(m.peer) != 0});
    obs_.publish(std::move(rows), running_, force);
  }

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

}  // namespace

int runScheduler(const Config& config) {
  auto auth = Authenticator::fromConfig(config);
  if (!auth.ok()) {
    LOG(ERROR) << "scheduler: " << auth.status().message();
    return 2;
  }
  if (auth->enabled())
    LOG(INFO) << "scheduler: nodes must prove ZPS_AUTH_TOKEN" << (config.curve ? "; CurveZMQ on" : "");
  Scheduler scheduler(config, *auth);
  return scheduler.run();
}

}  // namespace zps
