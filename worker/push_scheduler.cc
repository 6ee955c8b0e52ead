#include "worker/push_scheduler.h"

#include <glog/logging.h>

#include <algorithm>

#include "worker/fusion.h"

namespace zps {

PushScheduler::PushScheduler(size_t credit_bytes, Send send, size_t fusion_bytes)
    : credit_bytes_(std::max<size_t>(1, credit_bytes)), send_(std::move(send)), fusion_bytes_(fusion_bytes) {}

PushScheduler::Lane& PushScheduler::laneOf(int server) {
  Lane& lane = lanes_[server];
  lane.credit = credit_bytes_;
  return lane;
}

namespace {
// Deferrals alive on this thread (PushScheduler::Deferral).
thread_local int t_deferring = 0;
}  // namespace

PushScheduler::Deferral::Deferral(PushScheduler* scheduler) : scheduler_(scheduler) { ++t_deferring; }

PushScheduler::Deferral::~Deferral() {
  if (--t_deferring > 0) return;
  std::lock_guard<std::mutex> lock(scheduler_->mu_);
  std::vector<Lane*> lanes;
  lanes.swap(scheduler_->deferred_);
  for (Lane* lane : lanes) scheduler_->pump(*lane);
}

Status PushScheduler::send(const RequestSpec& to, std::vector<Blob> frames) {
  if (!to.priority) return send_(to, std::move(frames));
  std::lock_guard<std::mutex> lock(mu_);
  if (Lane* lane = admit(to, std::move(frames))) pumpOrDefer(*lane);
  return Status::OK();
}

Status PushScheduler::sendAll(std::vector<ReadyRequest> ready) {
  std::vector<ReadyRequest> now;
  {
    std::vector<Lane*> lanes;
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    for (ReadyRequest& r : ready) {
      if (!r.to.priority) {
        now.push_back(std::move(r));
        continue;
      }
      if (!lock.owns_lock()) lock.lock();
      Lane* lane = admit(r.to, std::move(r.frames));
      if (lane != nullptr && std::find(lanes.begin(), lanes.end(), lane) == lanes.end()) lanes.push_back(lane);
    }
    // Every request of the fan-out is queued before any leaves: what fits leaves together, fused.
    for (Lane* lane : lanes) pumpOrDefer(*lane);
  }
  return sendReady(std::move(now), fusion_bytes_, send_);
}

void PushScheduler::pumpOrDefer(Lane& lane) {
  if (t_deferring == 0) {
    pump(lane);
  } else if (std::find(deferred_.begin(), deferred_.end(), &lane) == deferred_.end()) {
    deferred_.push_back(&lane);
  }
}

PushScheduler::Lane* PushScheduler::admit(const RequestSpec& to, std::vector<Blob> frames) {
  auto it = known_.find(to.id);
  if (it != known_.end()) {
    // A resend: one still queued leaves in its turn; one in flight goes again at once, on the
    // credit it already holds.
    if (it->second.state == State::kSent) {
      Status sent = send_(to, std::move(frames));
      if (!sent.ok()) {
        LOG_EVERY_N(WARNING, 20) << "resend of scheduled request " << to.id << " not sent: " << sent.message();
      }
    }
    return nullptr;
  }
  Known& k = known_[to.id];
  k.server = to.server;
  k.state = State::kQueued;
  k.order = Order{*to.priority, arrivals_++};
  scheduled_.fetch_add(1, std::memory_order_release);
  Lane& lane = laneOf(k.server);
  lane.queue.emplace(k.order, Queued{to, std::move(frames)});
  return &lane;
}

void PushScheduler::completed(uint64_t id) {
  // Without scheduled requests (the default) a reply costs no lock here.
  if (scheduled_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(id);
  if (it == known_.end()) return;
  const Known k = it->second;
  known_.erase(it);
  scheduled_.fetch_sub(1, std::memory_order_release);
  Lane& lane = laneOf(k.server);
  switch (k.state) {
    case State::kQueued:
      lane.queue.erase(k.order);  // cancelled or failed before it left: its buffer is not read
      break;
    case State::kSent:
      lane.in_flight -= k.credit;
      pumpOrDefer(lane);
      break;
  }
}

void PushScheduler::pump(Lane& lane) {
  std::vector<ReadyRequest> released;
  while (!lane.queue.empty()) {
    auto head = lane.queue.begin();
    const size_t credit = head->second.to.credit;
    // A request that holds no credit leaves as soon as it is at the head.
    if (credit > 0 && lane.in_flight > 0 && lane.in_flight + credit > lane.credit) break;
    Queued q = std::move(head->second);
    lane.queue.erase(head);
    Known& k = known_[q.to.id];
    k.state = State::kSent;
    k.credit = credit;
    lane.in_flight += credit;
    released.push_back(ReadyRequest{std::move(q.to), std::move(q.frames)});
  }
  // Released together: small ones for this server travel as one message. The transport only fails
  // once it is closed (the job is ending); the requests' waits then fail or time out, naming them.
  Status sent = sendReady(std::move(released), fusion_bytes_, send_);
  if (!sent.ok()) {
    LOG_EVERY_N(WARNING, 20) << "scheduled requests not sent: " << sent.message();
  }
}

void PushScheduler::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lanes_.clear();
  deferred_.clear();
  known_.clear();
  scheduled_.store(0, std::memory_order_release);
}

size_t PushScheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [server, lane] : lanes_) n += lane.queue.size();
  return n;
}

size_t PushScheduler::inFlightBytes(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(server);
  return it == lanes_.end() ? 0 : it->second.in_flight;
}

}  // namespace zps
