#include "scheduler/membership.h"

#include <algorithm>
#include <set>

#include "ps/wire/codec.h"

namespace zps {

void Membership::rebind(PeerId from, PeerId to, const std::string& auth_nonce) {
  for (Member& m : members_) {
    if (m.peer != from) continue;
    m.peer = to;
    m.auth_nonce = auth_nonce;
  }
}

bool isSameProcess(const Member& m, const pb::Register& reg) {
  return m.host == reg.host() && m.port == static_cast<int>(reg.port()) && m.pid == static_cast<int>(reg.pid()) &&
         m.hostname == reg.hostname();
}

std::string Member::describe() const {
  std::string s = wire::roleName(role);
  s += rank >= 0 ? " " + std::to_string(rank) : requested_rank >= 0 ? " " + std::to_string(requested_rank) : "";
  s += " (" + host + ":" + std::to_string(port) + ", pid " + std::to_string(pid);
  if (!hostname.empty()) s += ", host name " + hostname;
  return s + ")";
}

Membership::Membership(int num_servers, int num_workers) : num_servers_(num_servers), num_workers_(num_workers) {}

int Membership::registered(pb::Role role) const {
  return static_cast<int>(
      std::count_if(members_.begin(), members_.end(), [&](const Member& m) { return m.role == role; }));
}

Status Membership::add(PeerId peer, const pb::Register& reg) {
  if (find(peer) != nullptr) return FailedPrecondition("this connection has already registered");
  const char* role = wire::roleName(reg.role());
  int limit = expected(reg.role());
  int rank = reg.requested_rank();
  if (rank >= limit) {
    return FailedPrecondition(std::string(role) + " rank " + std::to_string(rank) + " (from " + reg.rank_source() +
                              ") is out of range: the job has " + std::to_string(limit) + " " + role + "s, ranks 0.." +
                              std::to_string(limit - 1));
  }
  if (rank >= 0) {
    if (const Member* m = holder(reg.role(), rank)) {
      return FailedPrecondition(std::string(role) + " rank " + std::to_string(rank) + " (from " + reg.rank_source() +
                                ") is already taken by " + m->describe());
    }
  }
  // Copied into the address book of every node: a salt is 16 bytes.
  if (reg.data_salt().size() > kMaxDataSaltBytes)
    return FailedPrecondition("a data salt of " + std::to_string(reg.data_salt().size()) + " bytes; at most " +
                              std::to_string(kMaxDataSaltBytes) + " are accepted");
  if (registered(reg.role()) >= limit) {
    return FailedPrecondition("all " + std::to_string(limit) + " " + role + " slots are taken; check DMLC_NUM_" +
                              (reg.role() == pb::SERVER ? "SERVER" : "WORKER"));
  }
  // An arrival-order node must leave room for the ranks that ranked nodes already hold: that is implied
  // by the slot count check above, since each registered node holds exactly one slot.
  Member m;
  m.peer = peer;
  m.role = reg.role();
  m.requested_rank = rank;
  m.rank_source = reg.rank_source();
  m.host = reg.host();
  m.port = static_cast<int>(reg.port());
  m.hostname = reg.hostname();
  m.pid = static_cast<int>(reg.pid());
  m.auth_nonce = reg.auth_nonce();
  m.data_salt = reg.data_salt();
  members_.push_back(std::move(m));
  return Status::OK();
}

void Membership::remove(PeerId peer) {
  members_.erase(std::remove_if(members_.begin(), members_.end(), [&](const Member& m) { return m.peer == peer; }),
                 members_.end());
}

bool Membership::complete() const {
  return registered(pb::SERVER) == num_servers_ && registered(pb::WORKER) == num_workers_;
}

void Membership::assignRanks() {
  for (pb::Role role : {pb::SERVER, pb::WORKER}) {
    std::set<int> taken;
    for (auto& m : members_) {
      if (m.role == role && m.requested_rank >= 0) m.rank = m.requested_rank;
      if (m.role == role && m.rank >= 0) taken.insert(m.rank);
    }
    int next = 0;
    for (auto& m : members_) {
      if (m.role != role || m.rank >= 0) continue;
      while (taken.count(next) != 0) ++next;
      m.rank = next;
      taken.insert(next);
    }
  }
}

const Member* Membership::holder(pb::Role role, int rank) const {
  for (const auto& m : members_)
    if (m.role == role && (m.rank >= 0 ? m.rank : m.requested_rank) == rank) return &m;
  return nullptr;
}

const Member* Membership::find(PeerId peer) const {
  for (const auto& m : members_)
    if (m.peer == peer) return &m;
  return nullptr;
}

std::string Membership::report() const {
  std::string s = std::to_string(registered(pb::SERVER)) + "/" + std::to_string(num_servers_) + " servers, " +
                  std::to_string(registered(pb::WORKER)) + "/" + std::to_string(num_workers_) + " workers registered";
  std::string missing;
  for (pb::Role role : {pb::SERVER, pb::WORKER}) {
    const char* name = wire::roleName(role);
    std::set<int> taken;
    int unranked = 0;
    for (const auto& m : members_) {
      if (m.role != role) continue;
      if (m.requested_rank >= 0)
        taken.insert(m.requested_rank);
      else
        ++unranked;
    }
    // Ranks nobody asked for could still go to an arrival-order node; the first `unranked` free ranks are
    // the ones those nodes will get, so the rest are the missing ones.
    int skip = unranked;
    for (int r = 0; r < expected(role); ++r) {
      if (taken.count(r) != 0) continue;
      if (skip > 0) {
        --skip;
        continue;
      }
      if (!missing.empty()) missing += ", ";
      missing += std::string(name) + " rank " + std::to_string(r);
    }
  }
  if (!missing.empty()) s += "; missing: " + missing;
  std::string present;
  for (const auto& m : members_) {
    if (!present.empty()) present += ", ";
    present += m.describe();
  }
  if (!present.empty()) s += "; present: " + present;
  return s;
}

}  // namespace zps
