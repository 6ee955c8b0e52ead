#include "ps/server/reply_window.h"

namespace zps {

void ReplyWindow::expect(PeerId peer, uint64_t request_id, int64_t priority, uint64_t window) {
  std::lock_guard<std::mutex> lock(mu_);
  used_.store(true, std::memory_order_relaxed);
  Connection& c = peers_[peer];
  c.window = window;
  if (c.expected.size() < kMaxExpected) c.expected[request_id] = priority;
}

void ReplyWindow::offer(Outgoing o, std::vector<Outgoing>* send) {
  // A job whose workers never ordered a pull (no priority scheduling) pays no lock per answer. An
  // answer offered before the first expect() of a pull is no answer to that pull.
  if (!used_.load(std::memory_order_relaxed)) {
    send->push_back(std::move(o));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(o.peer);
  if (it == peers_.end()) {
    send->push_back(std::move(o));
    return;
  }
  Connection& c = it->second;
  auto e = c.expected.find(o.header.request_id());
  if (e == c.expected.end()) {
    send->push_back(std::move(o));
    return;
  }
  const int64_t priority = e->second;
  c.expected.erase(e);
  if (o.header.command() != pb::CMD_REPLY) {  // an error carries no sum: nothing to order or count
    send->push_back(std::move(o));
    return;
  }
  const auto order = std::make_pair(priority, arrivals_++);
  c.waiting.emplace(order, std::move(o));
  pump(c, Clock::now(), send);
  if (c.waiting.count(order) > 0) ++held_;
}

void ReplyWindow::offerAll(std::vector<Outgoing>* answers) {
  if (!used_.load(std::memory_order_relaxed)) return;  // as offer(): every answer leaves now
  std::vector<Outgoing> offered;
  offered.swap(*answers);
  for (Outgoing& o : offered) offer(std::move(o), answers);
}

void ReplyWindow::release(Connection& c, uint64_t request_id) {
  auto it = c.unacknowledged.find(request_id);
  if (it == c.unacknowledged.end()) return;
  c.unacknowledged_bytes -= it->second.bytes;
  c.unacknowledged.erase(it);
}

void ReplyWindow::pump(Connection& c, Clock::time_point now, std::vector<Outgoing>* send) {
  while (!c.waiting.empty()) {
    auto head = c.waiting.begin();
    const size_t bytes = head->second.payload.size();
    if (c.unacknowledged_bytes > 0 && c.unacknowledged_bytes + bytes > c.window) break;
    Outgoing o = std::move(head->second);
    c.waiting.erase(head);
    o.header.set_wants_received(true);
    // A request id answered twice (a resend's answer) is counted once: the first acknowledgement frees it.
    auto [slot, fresh] = c.unacknowledged.try_emplace(o.header.request_id(), Sent{bytes, now});
    if (fresh) c.unacknowledged_bytes += bytes;
    send->push_back(std::move(o));
  }
}

void ReplyWindow::expire(Clock::time_point now, std::vector<Outgoing>* send) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto p = peers_.begin(); p != peers_.end();) {
    Connection& c = p->second;
    for (auto it = c.unacknowledged.begin(); it != c.unacknowledged.end();) {
      if (now - it->second.at < deadline_) {
        ++it;
        continue;
      }
      c.unacknowledged_bytes -= it->second.bytes;
      it = c.unacknowledged.erase(it);
    }
    pump(c, now, send);
    // A connection with nothing announced, waiting or unacknowledged is forgotten (it may be gone).
    if (c.expected.empty() && c.waiting.empty() && c.unacknowledged.empty()) {
      p = peers_.erase(p);
    } else {
      ++p;
    }
  }
}

void ReplyWindow::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  peers_.clear();
}

uint64_t ReplyWindow::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_;
}

size_t ReplyWindow::unacknowledgedBytes(PeerId peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second.unacknowledged_bytes;
}

}  // namespace zps
