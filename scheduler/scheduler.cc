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

#include "ps/node/observability.h"
#include "ps/node/signals.h"
#include "scheduler/scheduler_role.h"

namespace zps {
namespace scheduler_role {
namespace {

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Scheduler::Scheduler(const Config& config, Authenticator auth)
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

int Scheduler::run() {
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
  LOG(INFO) << "scheduler listening on " << config_.bind_host << ":" << *port << ", waiting for " << config_.num_servers
            << " servers and " << config_.num_workers << " workers (rendezvous timeout "
            << config_.rendezvous_timeout.count() / 1000.0 << " s)";
  const int code = loop();
  if (end_)
    end_->linger(transport_.get(), membership_, limits_,
                 JobEnd::lingerFor(config_.heartbeat_interval, terminationRequested()));
  transport_->close();  // flushes the last shutdowns (ZPS_SHUTDOWN_LINGER)
  return code;
}

int Scheduler::loop() {
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

void Scheduler::startJob() {
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

int Scheduler::lose(PeerId peer, const std::string& why) {
  obs_.nodeDead(peer);
  gone_.insert(peer);  // not waited for at the end
  if (!config_.recovery) return endJob(1, "node dead: " + why);
  if (!finished_.empty())
    return endJob(1, "node dead: " + why + ", after a worker finished: a finished job cannot be redone (ZPS_RECOVERY)");
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

size_t Scheduler::groupSize(pb::BarrierGroup g) const {
  if (g == pb::GROUP_WORKERS) return config_.num_workers;
  if (g == pb::GROUP_SERVERS) return config_.num_servers;
  return config_.num_workers + config_.num_servers;
}

pb::Control Scheduler::barrierRelease(pb::BarrierGroup group) const {
  pb::Control c;
  c.mutable_barrier_release()->set_group(group);
  c.mutable_barrier_release()->set_sequence(barriers_.generation(group));
  c.mutable_barrier_release()->set_generation(generation_);
  return c;
}

void Scheduler::handleBarrier(const Member& m, const pb::Barrier& b) {
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

void Scheduler::handleFinished(const Member& m, const pb::Finished& f) {
  if (m.role != pb::WORKER) {
    LOG_EVERY_N(WARNING, 20) << "scheduler: 'finished' from " << m.describe() << " ignored (not a worker)";
    return;
  }
  if (!f.ok()) {
    endJob(1, m.describe() + " failed: " + f.message());
    return;
  }
  finished_.insert(m.peer);
  LOG(INFO) << "scheduler: " << m.describe() << " finished (" << finished_.size() << "/" << config_.num_workers << ")";
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

void Scheduler::handle(PeerId peer, const pb::Control& c) {
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

int Scheduler::checkLiveness(Clock::time_point now) {
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

int Scheduler::endJob(int code, const std::string& reason) {
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

void Scheduler::publishStatus(bool force) {
  std::vector<StatusBoard::Member> rows;
  for (const auto& m : membership_.members())
    rows.push_back(StatusBoard::Member{m.peer, m.role, m.rank >= 0 ? m.rank : m.requested_rank, m.host, m.hostname,
                                       static_cast<uint32_t>(m.pid), last_seen_[m.peer], finished_.count(m.peer) != 0});
  obs_.publish(std::move(rows), running_, force);
}

}  // namespace scheduler_role

int runScheduler(const Config& config) {
  auto auth = Authenticator::fromConfig(config);
  if (!auth.ok()) {
    LOG(ERROR) << "scheduler: " << auth.status().message();
    return 2;
  }
  if (auth->enabled())
    LOG(INFO) << "scheduler: nodes must prove ZPS_AUTH_TOKEN" << (config.curve ? "; CurveZMQ on" : "");
  scheduler_role::Scheduler scheduler(config, *auth);
  return scheduler.run();
}

}  // namespace zps
