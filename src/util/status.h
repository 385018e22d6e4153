// Errors as values. Every fallible function across a module boundary returns Status or
// Expected<T>; exceptions never cross modules and user input never aborts the process.
// Must not: know about models, files or HTTP.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace flashkv {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller (user, request, flag) gave something unusable
  kNotFound,           // a file, tensor, key or entry that should exist does not
  kIoError,            // the OS said no: open/read/write/fsync/rename failed
  kCorrupt,            // data on disk is malformed or fails a checksum
  kUnsupported,        // well-formed but not something flashkv handles
  kOutOfRange,         // an index, size or offset past a limit
  kResourceExhausted,  // out of memory, disk space, budget or context
  kFailedPrecondition, // called in the wrong state
  kCancelled,          // the work was stopped on request
  kInternal,           // a flashkv bug
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: tensor blk.0.attn_q_a.weight: offset past end of file"
  std::string ToString() const;
  // Prefixes the message with where it happened: "loading model.gguf: <message>".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status MakeStatus(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
#define FLASHKV_STATUS_HELPER(Name, Code)                                   \
  template <typename... Args>                                               \
  Status Name(fmt::format_string<Args...> f, Args&&... args) {              \
    return Status(StatusCode::Code, fmt::format(f, std::forward<Args>(args)...)); \
  }
FLASHKV_STATUS_HELPER(InvalidArgument, kInvalidArgument)
FLASHKV_STATUS_HELPER(NotFound, kNotFound)
FLASHKV_STATUS_HELPER(IoError, kIoError)
FLASHKV_STATUS_HELPER(Corrupt, kCorrupt)
FLASHKV_STATUS_HELPER(Unsupported, kUnsupported)
FLASHKV_STATUS_HELPER(OutOfRange, kOutOfRange)
FLASHKV_STATUS_HELPER(ResourceExhausted, kResourceExhausted)
FLASHKV_STATUS_HELPER(FailedPrecondition, kFailedPrecondition)
FLASHKV_STATUS_HELPER(Cancelled, kCancelled)
FLASHKV_STATUS_HELPER(Internal, kInternal)
#undef FLASHKV_STATUS_HELPER

// A value or the Status that explains why there is none (std::expected is C++23).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Expected built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  // The error; OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

#define FLASHKV_CONCAT_INNER(a, b) a##b
#define FLASHKV_CONCAT(a, b) FLASHKV_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` failed.
#define FLASHKV_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    ::flashkv::Status _fkv_status = (expr);           \
    if (!_fkv_status.ok()) return _fkv_status;        \
  } while (0)

// `lhs` = the value of Expected `expr`, or return its Status.
#define FLASHKV_ASSIGN_OR_RETURN(lhs, expr) \
  FLASHKV_ASSIGN_OR_RETURN_IMPL(FLASHKV_CONCAT(_fkv_expected_, __LINE__), lhs, expr)
#define FLASHKV_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

}  // namespace flashkv
