// FunctionRoute: a RequestRoute (worker/request_route.h) made of functions, and FunctionReceiver a
// ReplyReceiver, for the unit tests that give a RequestTable fake servers.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "worker/request_route.h"

namespace zps::testing {

struct FunctionRoute final : RequestRoute {
  using Send = std::function<Status(const RequestSpec& to, std::vector<Blob> frames)>;
  using Describe = std::function<std::string(int server)>;
  Send on_send;
  Describe on_describe = [](int server) { return "server " + std::to_string(server); };
  std::function<void(uint64_t id, bool ok)> on_completed;  // optional
  std::function<void()> on_wake_waiters;                   // optional

  FunctionRoute() = default;
  explicit FunctionRoute(Send send) : on_send(std::move(send)) {}
  FunctionRoute(Send send, Describe describe) : on_send(std::move(send)), on_describe(std::move(describe)) {}

  Status send(const RequestSpec& to, std::vector<Blob> frames) override { return on_send(to, std::move(frames)); }
  std::string describeServer(int server) const override { return on_describe(server); }
  void completed(uint64_t id, bool ok) override {
    if (on_completed) on_completed(id, ok);
  }
  void wakeWaiters() override {
    if (on_wake_waiters) on_wake_waiters();
  }
};

struct FunctionReceiver final : ReplyReceiver {
  using Receive = std::function<bool(int server, bool pushes, const std::function<bool()>& done)>;
  Receive on_receive;
  std::function<void()> on_wake;

  FunctionReceiver(Receive receive, std::function<void()> wake)
      : on_receive(std::move(receive)), on_wake(std::move(wake)) {}

  bool receiveFrom(int server, bool pushes, std::chrono::steady_clock::time_point,
                   const std::function<bool()>& done) override {
    return on_receive(server, pushes, done);
  }
  void wakeReceivers() override { on_wake(); }
  void waitOnIoThread(bool) override {}
};

}  // namespace zps::testing
