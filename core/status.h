// loft::Status and loft::StatusOr<T>: the one error type of the project.
//
// Every fallible call returns a Status (code + human-readable message) or a
// StatusOr<T>. Exceptions thrown by libraries (yaml-cpp, cppzmq, protobuf)
// are caught at the module edge and converted here. Both types are
// [[nodiscard]] so a dropped error is a compiler warning (an error in CI).
//
// Thread-safety: value types; safe to copy across threads.
#pragma once

#include <cassert>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace loft {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the caller passed something malformed
  kNotFound = 2,
  kAlreadyExists = 3,
  kFailedPrecondition = 4,  // the system is not in a state to do this
  kOutOfRange = 5,
  kDataLoss = 6,     // stored or received bytes are corrupt
  kUnavailable = 7,  // a peer or resource is (possibly transiently) unreachable
  kDeadlineExceeded = 8,
  kPermissionDenied = 9,
  kResourceExhausted = 10,
  kUnimplemented = 11,
  kInternal = 12,
  kAborted = 13,
  kIOError = 14,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "DataLoss: sample 17: CRC mismatch"; "OK" when ok().
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(std::string_view context) const;

  // Explicitly discard a status (documents the intent at the call site).
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& os, const Status& s);

inline Status OkStatus() {
  return Status();
}
inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status AlreadyExists(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status OutOfRange(std::string m) {
  return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status DataLoss(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}
inline Status Unavailable(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Unimplemented(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status Internal(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}
inline Status Aborted(std::string m) {
  return {StatusCode::kAborted, std::move(m)};
}
inline Status IOError(std::string m) {
  return {StatusCode::kIOError, std::move(m)};
}

// StatusOr<T>: either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Implicit from a non-OK status. Constructing from an OK status is a bug
  // and is turned into an Internal error.
  StatusOr(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Internal("StatusOr constructed from OK status") : std::move(status)) {}
  StatusOr(T value)  // NOLINT(google-explicit-constructor)
      : value_(std::move(value)) {}

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace loft

// Propagation helpers.
#define LOFT_CONCAT_INNER_(a, b) a##b
#define LOFT_CONCAT_(a, b) LOFT_CONCAT_INNER_(a, b)

#define LOFT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::loft::Status loft_status_ = (expr);        \
    if (!loft_status_.ok()) return loft_status_; \
  } while (0)

#define LOFT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define LOFT_ASSIGN_OR_RETURN(lhs, expr) \
  LOFT_ASSIGN_OR_RETURN_IMPL_(LOFT_CONCAT_(loft_statusor_, __LINE__), lhs, expr)
