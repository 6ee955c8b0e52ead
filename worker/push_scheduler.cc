#include "worker/push_scheduler.h"

#include <glog/logging.h>

#include <algorithm>

namespace zps {

PushScheduler::PushScheduler(size_t credit_bytes, Send send)
    : credit_bytes_(std::max<size_t>(1, credit_bytes)), send_(std::move(send)) {}

Status PushScheduler::send(const RequestSpec& to, std::vector<Blob> frames) {
  if (!to.priority) return send_(to, std::move(frames));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = known_.find(to.id);
  if (it != known_.end()) {
    // A resend: one still queued leaves in its turn; one in flight goes again at once, on the credit
    // it already holds.
    if (!it->second.sent) return Status::OK();
    return send_(to, std::move(frames));
  }
  const Order order{*to.priority, arrivals_++};
  known_[to.id] = Known{to.server, to.credit, false, order};
  scheduled_.fetch_add(1, std::memory_order_release);
  servers_[to.server].queue.emplace(order, Queued{to, std::move(frames)});
  pump(to.server);
  return Status::OK();
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
  Server& s = servers_[k.server];
  if (!k.sent) {
    s.queue.erase(k.order);  // cancelled or failed before it left: its buffer is not read
    return;
  }
  s.in_flight -= k.credit;
  pump(k.server);
}

void PushScheduler::pump(int server) {
  Server& s = servers_[server];
  while (!s.queue.empty()) {
    auto head = s.queue.begin();
    const size_t credit = head->second.to.credit;
    // A request that holds no credit (a pull behind its push) leaves as soon as it is at the head.
    if (credit > 0 && s.in_flight > 0 && s.in_flight + credit > credit_bytes_) return;
    Queued q = std::move(head->second);
    s.queue.erase(head);
    Known& k = known_[q.to.id];
    k.sent = true;
    s.in_flight += credit;
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
  scheduled_.store(0, std::memory_order_release);
}

size_t PushScheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [server, s] : servers_) n += s.queue.size();
  return n;
}

size_t PushScheduler::inFlightBytes(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = servers_.find(server);
  return it == servers_.end() ? 0 : it->second.in_flight;
}

}  // namespace zps
