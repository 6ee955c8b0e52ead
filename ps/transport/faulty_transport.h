// FaultyTransport: a Transport that wraps another and drops, duplicates or holds back the messages
// sent through it (ZPS_TEST_FAULTS="drop=0.05,dup=0.05,delay=0.05"). It exists to prove that resends
// and exactly-once summing work; never set it in production. Being a wrapper, the transport under it
// runs exactly its production paths (ipc sockets and shared memory included): a test with faults
// exercises the same code as a job without them, and the transport itself has no fault branch.
//
// Faults apply to sends only: each send() is dropped, sent twice, or held back for delay_ms, with the
// given probabilities, drawn from one generator seeded with `seed` (one draw per send). Receiving verbs
// (recv, onMessage, receiveOn) are forwarded untouched: every message a peer receives has already
// passed through its sender's faults, so faulting it again would only double the rates.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ps/transport/transport.h"

namespace zps {

struct FaultInjection {
  double drop = 0;
  double duplicate = 0;
  double delay = 0;
  int delay_ms = 20;
  uint64_t seed = 1;
  bool any() const { return drop > 0 || duplicate > 0 || delay > 0; }
};
// Reads ZPS_TEST_FAULTS: comma-separated name=number (drop, dup, delay, delay_ms, seed).
StatusOr<FaultInjection> parseFaultInjection(const std::string& spec);

class FaultyTransport final : public Transport {
 public:
  struct Counts {
    uint64_t dropped = 0;
    uint64_t duplicated = 0;
    uint64_t delayed = 0;
  };

  FaultyTransport(std::unique_ptr<Transport> inner, const FaultInjection& faults, std::string name);
  ~FaultyTransport() override;

  Status send(PeerId peer, std::vector<Blob> frames) override;
  // Sends what is still held back, then closes the transport under it.
  void close() override;
  Counts injected() const;

  StatusOr<int> listen(const std::string& host, int port) override { return inner_->listen(host, port); }
  StatusOr<PeerId> connect(const Endpoint& to) override { return inner_->connect(to); }
  StatusOr<TransportMessage> recv(std::chrono::steady_clock::time_point deadline) override {
    return inner_->recv(deadline);
  }
  void onMessage(std::function<void(TransportMessage)> handler) override { inner_->onMessage(std::move(handler)); }
  std::string describe(PeerId peer) const override { return inner_->describe(peer); }
  void forget(PeerId peer) override { inner_->forget(peer); }
  std::string handshakeFailure(PeerId peer) const override { return inner_->handshakeFailure(peer); }
  uint64_t refusedHandshakes() const override { return inner_->refusedHandshakes(); }
  uint64_t droppedReplies() const override { return inner_->droppedReplies(); }
  void onReconnect(std::function<void(PeerId)> handler) override { inner_->onReconnect(std::move(handler)); }
  void disconnect(PeerId peer) override { inner_->disconnect(peer); }
  uint64_t reconnects() const override { return inner_->reconnects(); }
  bool receiveOn(PeerId peer, std::chrono::steady_clock::time_point deadline,
                 const std::function<bool()>& done) override {
    return inner_->receiveOn(peer, deadline, done);
  }
  void wakeReceivers() override { inner_->wakeReceivers(); }
  void beginWaitOnIoThread() override { inner_->beginWaitOnIoThread(); }
  void endWaitOnIoThread() override { inner_->endWaitOnIoThread(); }

 private:
  struct Held {
    std::chrono::steady_clock::time_point due;
    PeerId peer;
    std::vector<Blob> frames;
  };

  // The delay timer's thread: sends each held message when it is due.
  void releaseHeld();

  const std::unique_ptr<Transport> inner_;
  const FaultInjection faults_;
  const std::string name_;
  mutable std::mutex mu_;
  std::condition_variable held_cv_;
  std::mt19937_64 rng_;
  Counts counts_;
  std::deque<Held> held_;  // in the order they are due: every delay is delay_ms
  bool closed_ = false;
  std::thread timer_;
};

// The one place where a role's transport is made: ZeroMQ, behind a FaultyTransport when `faults`
// inject any.
std::unique_ptr<Transport> makeTransport(const TransportOptions& options, const FaultInjection& faults);

}  // namespace zps
