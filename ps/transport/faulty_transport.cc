// FaultyTransport (ps/transport/faulty_transport.h): draws a fault for each send and keeps the held-back
// messages until their delay is over.
#include "ps/transport/faulty_transport.h"

#include <glog/logging.h>

namespace zps {
namespace {

// The timer's longest sleep while nothing is held: close() wakes it at once, this only bounds the wait.
constexpr std::chrono::seconds kIdleTimerWait{1};

}  // namespace

FaultyTransport::FaultyTransport(std::unique_ptr<Transport> inner, const FaultInjection& faults, std::string name)
    : inner_(std::move(inner)), faults_(faults), name_(std::move(name)), rng_(faults.seed) {
  if (faults_.delay > 0) timer_ = std::thread([this] { releaseHeld(); });
}

FaultyTransport::~FaultyTransport() { close(); }

Status FaultyTransport::send(PeerId peer, std::vector<Blob> frames) {
  enum class Fault { kNone, kDrop, kDuplicate, kDelay } fault = Fault::kNone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Aborted(name_ + " is closed");
    const double roll = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (roll < faults_.drop) {
      fault = Fault::kDrop;
      ++counts_.dropped;
    } else if (roll < faults_.drop + faults_.duplicate) {
      fault = Fault::kDuplicate;
      ++counts_.duplicated;
    } else if (roll < faults_.drop + faults_.duplicate + faults_.delay) {
      ++counts_.delayed;
      held_.push_back(Held{std::chrono::steady_clock::now() + std::chrono::milliseconds(faults_.delay_ms), peer,
                           std::move(frames)});
      held_cv_.notify_one();
      return Status::OK();
    }
  }
  switch (fault) {
    case Fault::kDrop: return Status::OK();  // as if lost on the wire
    case Fault::kDuplicate: {
      Status first = inner_->send(peer, frames);  // Blobs share their bytes: no copy
      if (!first.ok()) return first;
      return inner_->send(peer, std::move(frames));
    }
    default: return inner_->send(peer, std::move(frames));
  }
}

void FaultyTransport::releaseHeld() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!closed_) {
    const auto now = std::chrono::steady_clock::now();
    if (held_.empty() || held_.front().due > now) {
      held_cv_.wait_until(lock, held_.empty() ? now + kIdleTimerWait : held_.front().due);
      continue;
    }
    Held due = std::move(held_.front());
    held_.pop_front();
    lock.unlock();
    (void)inner_->send(due.peer, std::move(due.frames));  // fails only once closed
    lock.lock();
  }
}

void FaultyTransport::close() {
  std::deque<Held> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
    held.swap(held_);
  }
  held_cv_.notify_all();
  if (timer_.joinable()) timer_.join();
  for (Held& h : held) (void)inner_->send(h.peer, std::move(h.frames));  // the close flushes them
  const Counts c = injected();
  if (c.dropped + c.duplicated + c.delayed > 0)
    LOG(INFO) << name_ << ": injected " << c.dropped + c.duplicated + c.delayed << " test faults (" << c.dropped
              << " dropped, " << c.duplicated << " duplicated, " << c.delayed << " delayed)";
  inner_->close();
}

FaultyTransport::Counts FaultyTransport::injected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::unique_ptr<Transport> makeTransport(const TransportOptions& options, const FaultInjection& faults) {
  std::unique_ptr<Transport> transport = makeZmqTransport(options);
  if (!faults.any()) return transport;
  return std::make_unique<FaultyTransport>(std::move(transport), faults, options.name);
}

}  // namespace zps
