#include "worker/push_scheduler.h"

#include <glog/logging.h>

#include <algorithm>

namespace zps {

PushScheduler::PushScheduler(size_t credit_bytes, size_t reply_credit_bytes, Send send)
    : credit_bytes_(std::max<size_t>(1, credit_bytes)),
      reply_credit_bytes_(std::max<size_t>(1, reply_credit_bytes)),
      send_(std::move(send)) {}

PushScheduler::Lane& PushScheduler::laneOf(int server, bool reply) {
  Server& s = servers_[server];
  s.pushes.credit = credit_bytes_;
  s.replies.credit = reply_credit_bytes_;
  return reply ? s.replies : s.pushes;
}

Status PushScheduler::send(const RequestSpec& to, std::vector<Blob> frames) {
  if (!to.priority) return send_(to, std::move(frames));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(to.id);
  if (it != known_.end()) {
    // A resend: one still held or queued leaves in its turn; one in flight goes again at once, on the
    // credit it already holds.
    if (it->second.state != State::kSent) return Status::OK();
    return send_(to, std::move(frames));
  }
  Known k;
  k.server = to.server;
  k.reply = to.reply_credit > 0;
  scheduled_.fetch_add(1, std::memory_order_release);
  // A pull behind a push still queued or in flight waits for the push's acknowledgement; behind one
  // already completed (or never scheduled), it queues now.
  if (to.after && known_.count(*to.after) > 0 && held_.count(*to.after) == 0) {
    k.state = State::kHeld;
    k.after = *to.after;
    known_[to.id] = k;
    held_.emplace(*to.after, Queued{to, std::move(frames)});
    return Status::OK();
  }
  known_[to.id] = k;
  enqueue(Queued{to, std::move(frames)});
  return Status::OK();
}

void PushScheduler::enqueue(Queued q) {
  Known& k = known_[q.to.id];
  k.state = State::kQueued;
  k.order = Order{*q.to.priority, arrivals_++};
  Lane& lane = laneOf(k.server, k.reply);
  lane.queue.emplace(k.order, std::move(q));
  pump(lane);
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
  Lane& lane = laneOf(k.server, k.reply);
  switch (k.state) {
    case State::kHeld:
      held_.erase(k.after);  // cancelled or failed before its push was acknowledged
      break;
    case State::kQueued:
      lane.queue.erase(k.order);  // cancelled or failed before it left: its buffer is not read
      break;
    case State::kSent:
      lane.in_flight -= k.credit;
      pump(lane);
      break;
  }
  // The pull behind this request (its push) may queue now, whether the push succeeded or not: a
  // failed push fails the pull's operation too, which completes the pull.
  if (auto behind = held_.find(id); behind != held_.end()) {
    Queued q = std::move(behind->second);
    held_.erase(behind);
    enqueue(std::move(q));
  }
}

void PushScheduler::pump(Lane& lane) {
  while (!lane.queue.empty()) {
    auto head = lane.queue.begin();
    const size_t credit = creditOf(head->second);
    // A request that holds no credit leaves as soon as it is at the head.
    if (credit > 0 && lane.in_flight > 0 && lane.in_flight + credit > lane.credit) return;
    Queued q = std::move(head->second);
    lane.queue.erase(head);
    Known& k = known_[q.to.id];
    k.state = State::kSent;
    k.credit = credit;
    lane.in_flight += credit;
    // The transport only fails once it is closed (the job is ending); the request's wait then
    // fails or times out, naming it.
    Status sent = send_(q.to, std::move(q.frames));
    if (!sent.ok()) {
      LOG_EVERY_N(WARNING, 20) << "scheduled request " << q.to.id << " not sent: " << sent.message();
    }
  }
}

void PushScheduler::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  servers_.clear();
  known_.clear();
  held_.clear();
  scheduled_.store(0, std::memory_order_release);
}

size_t PushScheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = held_.size();
  for (const auto& [server, s] : servers_) n += s.pushes.queue.size() + s.replies.queue.size();
  return n;
}

size_t PushScheduler::inFlightBytes(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = servers_.find(server);
  return it == servers_.end() ? 0 : it->second.pushes.in_flight;
}

size_t PushScheduler::replyBytesInFlight(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = servers_.find(server);
  return it == servers_.end() ? 0 : it->second.replies.in_flight;
}

}  // namespace zps
