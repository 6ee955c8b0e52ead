#include "server/scheduling/push_pacer.h"

#include <algorithm>
#include <limits>

namespace zps {

PushPacer::PushPacer(int num_workers, uint64_t lead, Clock::duration active, Clock::duration deadline)
    : lead_(lead), active_(active), deadline_(deadline), workers_(std::max(0, num_workers)) {}

void PushPacer::arrived(PeerId peer, const pb::Data& push, int worker, uint64_t bytes, std::vector<Outgoing>* send,
                        Clock::time_point now) {
  if (lead_ == 0 || worker < 0 || worker >= static_cast<int>(workers_.size())) return;
  std::lock_guard<std::mutex> lock(mu_);
  used_.store(true, std::memory_order_relaxed);
  Worker& w = workers_[worker];
  w.pushed += bytes;
  w.last_push = now;
  auto& ids = announced_[peer];
  if (ids.size() < kMaxAnnounced) ids[push.request_id()] = Announced{worker, bytes};
  // This push may have been the slowest worker's: the others' acknowledgements may leave now.
  if (holding_ > 0) releaseReady(now, send);
}

void PushPacer::offer(Outgoing o, std::vector<Outgoing>* send, Clock::time_point now) {
  // A job whose workers never pushed with credit pays no lock per answer.
  if (!used_.load(std::memory_order_relaxed)) {
    send->push_back(std::move(o));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto p = announced_.find(o.peer);
  if (p == announced_.end()) {
    send->push_back(std::move(o));
    return;
  }
  auto a = p->second.find(o.data.request_id());
  if (a == p->second.end()) {
    send->push_back(std::move(o));
    return;
  }
  Worker& w = workers_[a->second.worker];
  p->second.erase(a);
  if (p->second.empty()) announced_.erase(p);
  // An error returns the credit too, but says something is wrong: it never waits. Nor does an
  // acknowledgement queue behind none while its worker is within the lead.
  if (wire::commandOf(o.data) != pb::CMD_REPLY || (w.held.empty() && mayLeave(w, now))) {
    send->push_back(std::move(o));
    return;
  }
  w.held.push_back(Held{std::move(o), now});
  ++holding_;
  ++held_;
}

void PushPacer::offerAll(std::vector<Outgoing>* answers) {
  if (!used_.load(std::memory_order_relaxed)) return;  // as offer(): every answer leaves now
  std::vector<Outgoing> offered;
  offered.swap(*answers);
  const Clock::time_point now = Clock::now();
  for (Outgoing& o : offered) offer(std::move(o), answers, now);
}

void PushPacer::expire(Clock::time_point now, std::vector<Outgoing>* send) {
  if (!used_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (holding_ > 0) releaseReady(now, send);
}

uint64_t PushPacer::slowest(Clock::time_point now) const {
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (const Worker& w : workers_) {
    if (w.last_push != Clock::time_point{} && now - w.last_push <= active_) least = std::min(least, w.pushed);
  }
  return least == std::numeric_limits<uint64_t>::max() ? 0 : least;
}

void PushPacer::releaseReady(Clock::time_point now, std::vector<Outgoing>* send) {
  for (Worker& w : workers_) {
    while (!w.held.empty()) {
      const bool late = now - w.held.front().since >= deadline_;
      if (!late && !mayLeave(w, now)) break;
      if (late && !mayLeave(w, now)) {
        // Holding did not bring the others level in time: forgive this worker's excess, so that it is
        // not held again for what it cannot change.
        w.pushed = slowest(now) + lead_;
        ++expired_;
      }
      send->push_back(std::move(w.held.front().ack));
      w.held.pop_front();
      --holding_;
    }
  }
}

void PushPacer::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Worker& w : workers_) w = Worker{};
  announced_.clear();
  holding_ = 0;
}

uint64_t PushPacer::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

uint64_t PushPacer::expired() const {
  std::lock_guard<std::mutex> lock(mu_);
  return expired_;
}

uint64_t PushPacer::pushedBytes(int worker) const {
  std::lock_guard<std::mutex> lock(mu_);
  return worker >= 0 && worker < static_cast<int>(workers_.size()) ? workers_[worker].pushed : 0;
}

}  // namespace zps
