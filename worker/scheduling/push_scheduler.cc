#include "worker/scheduling/push_scheduler.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>

#include "worker/scheduling/fusion.h"

namespace zps {

PushScheduler::PushScheduler(size_t credit_bytes, Send send, FusionPolicy fusion)
    : credit_bytes_(std::max<size_t>(1, credit_bytes)), send_(std::move(send)), fusion_(std::move(fusion)) {}

namespace {
// Deferrals alive on this thread (PushScheduler::Deferral).
thread_local int t_deferring = 0;
}  // namespace

PushScheduler::Deferral::Deferral(PushScheduler* scheduler) : scheduler_(scheduler) { ++t_deferring; }

PushScheduler::Deferral::~Deferral() {
  if (--t_deferring > 0) return;
  std::lock_guard<std::mutex> lock(scheduler_->mu_);
  std::vector<ServerQueue*> queues;
  queues.swap(scheduler_->deferred_);
  for (ServerQueue* queue : queues) scheduler_->pump(*queue);
}

Status PushScheduler::send(const RequestSpec& to, std::vector<Blob> frames) {
  if (!to.priority) return send_(to, std::move(frames));
  std::lock_guard<std::mutex> lock(mu_);
  if (ServerQueue* queue = admit(to, std::move(frames))) pumpOrDefer(*queue);
  return Status::OK();
}

Status PushScheduler::sendAll(std::vector<ReadyRequest> ready) {
  std::vector<ReadyRequest> now;
  {
    std::vector<ServerQueue*> queues;
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    for (ReadyRequest& r : ready) {
      if (!r.to.priority) {
        now.push_back(std::move(r));
        continue;
      }
      if (!lock.owns_lock()) lock.lock();
      ServerQueue* queue = admit(r.to, std::move(r.frames));
      if (queue != nullptr && std::find(queues.begin(), queues.end(), queue) == queues.end()) queues.push_back(queue);
    }
    // Every request of the fan-out is queued before any leaves: what fits leaves together, fused.
    for (ServerQueue* queue : queues) pumpOrDefer(*queue);
  }
  return sendReady(std::move(now), fusion_, send_);
}

void PushScheduler::pumpOrDefer(ServerQueue& queue) {
  if (t_deferring == 0) {
    pump(queue);
  } else if (std::find(deferred_.begin(), deferred_.end(), &queue) == deferred_.end()) {
    deferred_.push_back(&queue);
  }
}

PushScheduler::ServerQueue* PushScheduler::admit(const RequestSpec& to, std::vector<Blob> frames) {
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
  k.order = Order{false, *to.priority, arrivals_++};
  scheduled_.fetch_add(1, std::memory_order_release);
  ServerQueue& queue = queues_[k.server];
  queue.waiting.emplace(k.order, Queued{to, std::move(frames)});
  return &queue;
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
  ServerQueue& queue = queues_[k.server];
  switch (k.state) {
    case State::kQueued:
      queue.waiting.erase(k.order);  // cancelled or failed before it left: its buffer is not read
      break;
    case State::kSent:
      queue.in_flight -= k.credit;
      if (gauge_ && k.credit > 0) credit_bytes_ = gauge_->acknowledged(k.credit, k.sent_at, CreditGauge::Clock::now());
      pumpOrDefer(queue);
      break;
  }
}

void PushScheduler::hurry(int server, const google::protobuf::RepeatedPtrField<pb::AwaitedRound>& awaited) {
  if (awaited.empty() || scheduled_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto q = queues_.find(server);
  if (q == queues_.end()) return;
  auto& waiting = q->second.waiting;
  for (auto it = waiting.begin(); it != waiting.end();) {
    const RequestSpec& to = it->second.to;
    const bool named = std::any_of(awaited.begin(), awaited.end(), [&](const pb::AwaitedRound& a) {
      return a.key() == to.key && a.round() == to.round;
    });
    if (it->first.hurried || !named) {
      ++it;
      continue;
    }
    // Re-keyed in place: it lands among the hurried ones at the front, behind the iterator.
    const Order order{true, it->first.priority, it->first.arrival};
    known_[to.id].order = order;
    auto node = waiting.extract(it++);
    node.key() = order;
    waiting.insert(std::move(node));
    ++hurried_;
  }
}

void PushScheduler::adaptCredit(size_t ceiling, int servers) {
  gauge_ = std::make_unique<CreditGauge>(credit_bytes_, ceiling, servers);
}

std::string PushScheduler::creditReport() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!gauge_ || gauge_->minRoundTrip() == CreditGauge::Clock::duration::zero()) return "";
  char text[160];
  std::snprintf(text, sizeof text,
                "push credit per server %zu bytes (%.1f MB/s acknowledged at most, shortest round trip %.1f ms)",
                credit_bytes_, gauge_->rateBytesPerSecond() / 1e6,
                std::chrono::duration<double, std::milli>(gauge_->minRoundTrip()).count());
  return text;
}

void PushScheduler::pump(ServerQueue& queue) {
  std::vector<ReadyRequest> released;
  const auto now = CreditGauge::Clock::now();
  while (!queue.waiting.empty()) {
    auto head = queue.waiting.begin();
    const size_t credit = head->second.to.credit;
    // A request that holds no credit leaves as soon as it is at the head.
    if (credit > 0 && queue.in_flight > 0 && queue.in_flight + credit > credit_bytes_) break;
    Queued q = std::move(head->second);
    queue.waiting.erase(head);
    Known& k = known_[q.to.id];
    k.state = State::kSent;
    k.credit = credit;
    k.sent_at = now;
    queue.in_flight += credit;
    released.push_back(ReadyRequest{std::move(q.to), std::move(q.frames)});
  }
  // Released together: small ones for this server travel as one message. The transport only fails
  // once it is closed (the job is ending); the requests' waits then fail or time out, naming them.
  Status sent = sendReady(std::move(released), fusion_, send_);
  if (!sent.ok()) {
    LOG_EVERY_N(WARNING, 20) << "scheduled requests not sent: " << sent.message();
  }
}

void PushScheduler::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  queues_.clear();
  deferred_.clear();
  known_.clear();
  scheduled_.store(0, std::memory_order_release);
}

size_t PushScheduler::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [server, queue] : queues_) n += queue.waiting.size();
  return n;
}

uint64_t PushScheduler::hurried() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hurried_;
}

size_t PushScheduler::inFlightBytes(int server) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(server);
  return it == queues_.end() ? 0 : it->second.in_flight;
}

}  // namespace zps
