#include "worker/request_table.h"

#include <glog/logging.h>

#include <cstring>

#include "kernels/nonzero_encoding.h"
#include "ps/common/config.h"
#include "ps/wire/codec.h"

namespace zps {
namespace {

// Late replies of cancelled requests are recognised among this many most recent cancellations.
constexpr size_t kCancelledRemembered = 1 << 16;

// The status of a server's ERROR reply: recovering (ZPS_RECOVERY), the user's input refused (a user
// error, exit 2), or a failure.
Status errorReplyStatus(const pb::Error& e, const std::string& from) {
  if (e.recovering()) return Unavailable(from + " is " + e.text());
  if (e.user_error()) return InvalidArgument(from + " refused: " + e.text());
  return InternalError(from + " answered: " + e.text());
}

}  // namespace

Status RequestRoute::sendAll(std::vector<ReadyRequest> requests) {
  for (ReadyRequest& r : requests) ZPS_RETURN_IF_ERROR(send(r.to, std::move(r.frames)));
  return Status::OK();
}

RequestTable::RequestTable(RequestRoute* route, std::chrono::milliseconds resend_timeout)
    : route_(route), resend_timeout_(resend_timeout) {}

pb::Data RequestTable::newRequest() {
  pb::Data d;
  d.set_protocol_version(wire::kProtocolVersion);
  std::lock_guard<std::mutex> lock(mu_);
  d.set_request_id(next_request_++);
  d.set_generation(generation_);
  return d;
}

void RequestTable::setGeneration(uint64_t generation) {
  std::lock_guard<std::mutex> lock(mu_);
  generation_ = generation;
}

StatusOr<std::shared_ptr<PendingOp>> RequestTable::send(FanOut fan) {
  std::shared_ptr<PendingOp> op = fan.op;
  std::vector<ReadyRequest> sends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) return aborted_->withContext(op->what);
    if (refused_) return refused_->withContext(op->what);
    const Clock::time_point now = Clock::now();
    for (OutgoingRequest& o : fan.requests) {
      Entry e;
      e.request = std::move(o.request);
      e.op = op;
      e.sent = now;
      e.frames = o.frames;  // references, not copies: for resends (a timeout, a reconnection)
      route_->issued(o.id, o);
      sends.push_back(ReadyRequest{e.request, std::move(o.frames)});
      pending_[o.id] = std::move(e);
      op->requests.push_back(o.id);
      ++op->remaining;
    }
  }
  if (Status sent = route_->sendAll(std::move(sends)); !sent.ok()) {
    cancel(op);
    return sent.withContext(op->what);
  }
  return op;
}

StatusOr<Handle> RequestTable::issue(FanOut fan) {
  ZPS_ASSIGN_OR_RETURN(std::shared_ptr<PendingOp> op, send(std::move(fan)));
  std::lock_guard<std::mutex> lock(mu_);
  Handle handle = next_handle_++;
  handles_[handle] = op;
  return handle;
}

Status RequestTable::run(FanOut fan, std::chrono::milliseconds timeout) {
  ZPS_ASSIGN_OR_RETURN(std::shared_ptr<PendingOp> op, send(std::move(fan)));
  return cancelAfter(op, waitFor(op, timeout));
}

Status RequestTable::cancelAfter(const std::shared_ptr<PendingOp>& op, const Status& failed) {
  if (failed.ok() || !cancel(op) || !op->on_cancelled) return failed;
  return op->on_cancelled(failed);
}

Handle RequestTable::completed(Status status) {
  auto op = std::make_shared<PendingOp>();
  op->status = std::move(status);
  std::lock_guard<std::mutex> lock(mu_);
  Handle handle = next_handle_++;
  handles_[handle] = op;
  return handle;
}

std::shared_ptr<PendingOp> RequestTable::take(Handle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return nullptr;
  auto op = it->second;
  handles_.erase(it);
  return op;
}

Status RequestTable::wait(Handle handle, std::chrono::milliseconds timeout) {
  std::shared_ptr<PendingOp> op = take(handle);
  if (op == nullptr) return InvalidArgument("unknown or already waited handle " + std::to_string(handle));
  return cancelAfter(op, waitFor(op, timeout));
}

StatusOr<bool> RequestTable::poll(Handle handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return InvalidArgument("unknown or already waited handle " + std::to_string(handle));
  return it->second->remaining == 0 || aborted_.has_value();
}

Status RequestTable::waitFor(const std::shared_ptr<PendingOp>& op, std::chrono::milliseconds timeout) {
  return waitUntil(op, Clock::now() + timeout, timeout);
}

Status RequestTable::waitUntil(const std::shared_ptr<PendingOp>& op, Clock::time_point deadline,
                               std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return op->remaining == 0 || aborted_.has_value(); });
  // A reply being copied finishes first: the caller may reuse or free the buffer once we return.
  // After abort() a program that stops at its first failed wait may free every buffer of the
  // operations it never waits for: so an aborted wait returns only when no copy of any operation is
  // in progress (none starts after the abort, see deliver).
  cv_.wait(lock, [&] { return op->delivering == 0 && (!aborted_ || delivering_ == 0); });
  if (op->remaining == 0) return op->status;
  if (aborted_) return aborted_->withContext(op->what);
  return DeadlineExceeded(op->what + ": " + std::to_string(op->remaining) + " replies missing after " +
                          secondsText(timeout) + " s: " + missing(*op));
}

bool RequestTable::ended(const std::shared_ptr<PendingOp>& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  return op->remaining == 0 || aborted_.has_value();
}

std::optional<RequestTable::SoleServer> RequestTable::soleServer(const std::shared_ptr<PendingOp>& op) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (op->remaining == 0 || aborted_) return std::nullopt;
  std::optional<SoleServer> sole;
  for (uint64_t id : op->requests) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    const RequestSpec& r = it->second.request;
    if (r.via || (sole && sole->server != r.server)) return std::nullopt;  // a HELLO moving to ipc, or several
    if (!sole) sole = SoleServer{r.server, false};
    sole->pushes = sole->pushes || r.scheduledPush();
  }
  return sole;
}

std::string RequestTable::missing(const PendingOp& op) const {
  std::string text;
  int shown = 0;
  for (uint64_t id : op.requests) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    if (shown++ == 4) {
      text += ", ...";
      break;
    }
    if (!text.empty()) text += ", ";
    text +=
        "key " + std::to_string(it->second.request.key) + " from " + route_->describeServer(it->second.request.server);
  }
  return text;
}

bool RequestTable::cancel(const std::shared_ptr<PendingOp>& op) {
  std::unique_lock<std::mutex> lock(mu_);
  if (op->remaining == 0 || op->cancelled) return false;
  op->cancelled = true;
  forget(op);
  // A reply already being copied completes (deliver holds no lock while it copies); wait for it so
  // that the caller's buffer is ours no more once this returns.
  cv_.wait(lock, [&] { return op->delivering == 0; });
  return true;
}

void RequestTable::forget(const std::shared_ptr<PendingOp>& op) {
  for (uint64_t id : op->requests) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second.delivering) continue;
    pending_.erase(it);
    rememberCancelled(id);
    route_->completed(id, false);
  }
}

void RequestTable::rememberCancelled(uint64_t id) {
  cancelled_.insert(id);
  cancelled_order_.push_back(id);
  if (cancelled_order_.size() > kCancelledRemembered) {
    cancelled_.erase(cancelled_order_.front());
    cancelled_order_.pop_front();
  }
}

void RequestTable::complete(uint64_t id, const Status& status) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  route_->completed(id, status.ok());
  std::shared_ptr<PendingOp> op = it->second.op;
  if (!status.ok() && op->status.ok()) op->status = status.withContext(op->what);
  pending_.erase(it);
  if (--op->remaining > 0) return;
  if (op->on_done && !op->cancelled) op->on_done();
  cv_.notify_all();
}

Delivery RequestTable::deliver(int server, const pb::Data& reply, DType dtype, const Blob& payload,
                               const std::string& from) {
  const uint64_t id = reply.request_id();
  std::unique_lock<std::mutex> lock(mu_);
  if (aborted_) {
    // The job has ended: the program may have freed the buffers of operations it never waited for.
    ++dropped_;
    return Delivery::kCancelled;
  }
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.request.server != server || it->second.delivering) {
    if (cancelled_.erase(id) > 0) {
      ++dropped_;
      VLOG(1) << "dropped the late reply to cancelled request " << id << " (key " << wire::keyOf(reply) << ") from "
              << from;
      return Delivery::kCancelled;
    }
    LOG_EVERY_N(WARNING, 20) << "reply for unknown request " << id << " from " << from;
    return Delivery::kUnknown;
  }
  const RequestSpec& r = it->second.request;
  if (reply.has_error()) {
    complete(id, errorReplyStatus(reply.error(), from));
    return Delivery::kDelivered;
  }
  if (wire::commandOf(reply) != pb::CMD_REPLY) {
    complete(id, ProtocolError(from + " sent " + pb::DataCommand_Name(wire::commandOf(reply))));
    return Delivery::kDelivered;
  }
  const size_t row_bytes = size_t{r.row_dim} * sizeof(float);
  if (r.positions && payload.size() != r.positions->size() * row_bytes) {
    complete(id, ProtocolError(from + " returned " + std::to_string(payload.size()) + " bytes for " +
                               std::to_string(r.positions->size()) + " rows"));
    return Delivery::kDelivered;
  }
  // A nonzero-encoded sum (the codec checked its size and bitmap) is decoded into the buffer.
  const bool nonzero = reply.has_reply() && reply.reply().encoding() == pb::ENCODING_NONZERO;
  const uint64_t reply_bytes = nonzero ? reply.reply().num_elements() * sizeof(float) : payload.size();
  if (!r.positions && r.out != nullptr && (reply_bytes != r.bytes || dtype != r.dtype)) {
    complete(id, ProtocolError(from + " returned " + std::to_string(reply_bytes) + " bytes of " +
                               std::string(dtypeName(dtype)) + ", expected " + std::to_string(r.bytes) + " of " +
                               std::string(dtypeName(r.dtype))));
    return Delivery::kDelivered;
  }
  if (nonzero && r.positions) {
    complete(id, ProtocolError(from + " returned table rows nonzero-encoded"));
    return Delivery::kDelivered;
  }
  // Copy outside the lock: other replies and new requests go on meanwhile. cancel() and waitFor()
  // wait for `delivering` to drop, so the buffer is still the caller's while we write it.
  it->second.delivering = true;
  std::shared_ptr<PendingOp> op = it->second.op;
  ++op->delivering;
  ++delivering_;
  const RequestSpec request = r;
  lock.unlock();
  Status status = request.on_reply ? request.on_reply(reply) : Status::OK();
  if (status.ok() && request.positions) {
    for (size_t i = 0; i < request.positions->size(); ++i)
      std::memcpy(request.out + (*request.positions)[i] * row_bytes, payload.data() + i * row_bytes, row_bytes);
  } else if (status.ok() && request.out != nullptr && nonzero) {
    kernels::addNonzero(request.out, request.bytes / sizeof(float), payload.data(), /*first=*/true);
  } else if (status.ok() && request.out != nullptr) {
    std::memcpy(request.out, payload.data(), request.bytes);
  }
  lock.lock();
  --op->delivering;
  --delivering_;
  it = pending_.find(id);  // still there: only deliver removes a request being delivered
  it->second.delivering = false;
  complete(id, status);
  cv_.notify_all();
  return Delivery::kDelivered;
}

int RequestTable::resendOverdue(Clock::time_point now) {
  std::vector<std::pair<RequestSpec, std::vector<Blob>>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, e] : pending_) {
      if (e.frames.empty() || e.delivering || now - e.sent < resend_timeout_) continue;
      e.sent = now;
      ++resent_;
      VLOG(1) << "resending request " << id << " (key " << e.request.key << ") to "
              << route_->describeServer(e.request.server);
      due.emplace_back(e.request, e.frames);
    }
  }
  // The servers count each worker once per key and round: a resent push is acknowledged again but
  // never summed twice. A failed send is retried at the next period.
  for (auto& [to, frames] : due) (void)route_->send(to, std::move(frames));
  return static_cast<int>(due.size());
}

int RequestTable::resendTo(int server) {
  std::vector<std::pair<RequestSpec, std::vector<Blob>>> due;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const Clock::time_point now = Clock::now();
    for (auto& [id, e] : pending_) {
      if (e.request.server != server || e.frames.empty() || e.delivering) continue;
      e.sent = now;
      ++resent_;
      due.emplace_back(e.request, e.frames);
    }
  }
  for (auto& [to, frames] : due) (void)route_->send(to, std::move(frames));
  return static_cast<int>(due.size());
}

void RequestTable::abort(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) aborted_ = why;
    cv_.notify_all();
  }
  route_->wakeWaiters();
}

std::optional<Status> RequestTable::aborted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void RequestTable::refuse(std::optional<Status> why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused_ = why;
    if (!why) return;
    std::vector<uint64_t> ids;
    for (const auto& [id, e] : pending_) {
      if (!e.delivering) ids.push_back(id);
    }
    for (uint64_t id : ids) complete(id, *why);
    cv_.notify_all();
  }
  route_->wakeWaiters();
}

uint64_t RequestTable::resent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resent_;
}

uint64_t RequestTable::droppedReplies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

size_t RequestTable::pendingCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

}  // namespace zps
