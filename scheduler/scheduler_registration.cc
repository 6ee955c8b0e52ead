// How nodes join the scheduler's job (scheduler/scheduler_role.h): a registration is checked (protocol,
// token proof, job shape, rank), admitted, parked as a replacement, or refused with the reason; members
// that rejoin keep their rank; the address book every node gets once the job is complete.
#include <glog/logging.h>

#include <algorithm>

#include "scheduler/scheduler_role.h"

namespace zps::scheduler_role {

void Scheduler::refuse(PeerId peer, const std::string& why) {
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

void Scheduler::forgetStranger(PeerId peer) {
  if (membership_.find(peer) == nullptr && parked_.count(peer) == 0) transport_->forget(peer);
}

void Scheduler::handleRegister(PeerId peer, const pb::Register& reg) {
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

void Scheduler::admit(PeerId peer, const pb::Register& reg) {
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

void Scheduler::noteRejoin(const pb::Register& reg) {
  if (rebuild_.note(reg))
    LOG(WARNING) << "scheduler: a " << wire::roleName(reg.role()) << " of a running job registers again (rank "
                 << reg.requested_rank() << ", generation " << reg.generation()
                 << "): rebuilding the job from its nodes (ZPS_RECOVERY)";
}

bool Scheduler::rebind(PeerId peer, const pb::Register& reg) {
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

pb::RegisterReply Scheduler::book() const {
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

void Scheduler::sendBook() {
  membership_.assignRanks();
  const pb::RegisterReply all = book();
  for (const auto& m : membership_.members()) sendBookTo(m, all);
}

void Scheduler::sendBookTo(const Member& m, const pb::RegisterReply& all) {
  pb::Control c;
  *c.mutable_register_reply() = all;
  c.mutable_register_reply()->set_rank(m.rank);
  if (auth_.enabled()) c.mutable_register_reply()->set_auth_mac(auth_.mac(kRegisterReplyContext, m.auth_nonce));
  send(m.peer, c);
}

}  // namespace zps::scheduler_role
