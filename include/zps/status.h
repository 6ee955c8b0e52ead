// Status and StatusOr: the error type of every fallible zps function.
// Errors carry context as they rise ("while pulling key 42 from server 3: ..."), so callers wrap them with
// Status::withContext instead of logging and re-creating them. Nothing in zps throws across a module edge.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace zps {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller (user, env, flag) gave a bad value
  kDeadlineExceeded,  // a wait expired; the message says what it waited for
  kUnavailable,       // a peer cannot be reached or went away
  kProtocol,          // a peer sent bytes that do not decode or break the protocol
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,  // the call is not valid in the current state
  kAborted,             // the job was shut down (by the scheduler or a signal)
  kInternal,
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string toString() const;

  // Returns a copy whose message reads "<context>: <old message>".
  Status withContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status ProtocolError(std::string m) { return {StatusCode::kProtocol, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace zps

#define ZPS_CONCAT_INNER(a, b) a##b
#define ZPS_CONCAT(a, b) ZPS_CONCAT_INNER(a, b)

#define ZPS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::zps::Status zps_status_ = (expr);        \
    if (!zps_status_.ok()) return zps_status_; \
  } while (0)

#define ZPS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define ZPS_ASSIGN_OR_RETURN(lhs, expr) ZPS_ASSIGN_OR_RETURN_IMPL(ZPS_CONCAT(zps_statusor_, __LINE__), lhs, expr)
