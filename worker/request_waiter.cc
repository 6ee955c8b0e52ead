#include "worker/request_waiter.h"

#include <string>

namespace zps {

void RequestWaiter::wakeReceivers() {
  if (ReplyReceiver* receiver = receiver_.load()) receiver->wakeReceivers();
}

Status RequestWaiter::wait(Handle handle, std::chrono::milliseconds timeout) {
  std::shared_ptr<PendingOp> op = table_->take(handle);
  if (op == nullptr) return InvalidArgument("unknown or already waited handle " + std::to_string(handle));
  return table_->cancelAfter(op, waitFor(op, timeout));
}

Status RequestWaiter::waitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout) {
  ReplyReceiver* const receiver = receiver_.load();
  if (receiver == nullptr) return table_->waitFor(op, timeout);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (const std::optional<RequestTable::SoleServer> sole = table_->soleServer(op))
    receiver->receiveFrom(sole->server, sole->pushes, deadline, [&] { return table_->ended(op); });
  // The replies still missing come through the I/O thread: the transport must not keep connections
  // with threads that received there before (Transport::beginWaitOnIoThread).
  const bool tell = !table_->ended(op);
  if (tell) receiver->waitOnIoThread(true);
  Status waited = table_->waitUntil(op, deadline, timeout);
  if (tell) receiver->waitOnIoThread(false);
  return waited;
}

}  // namespace zps
