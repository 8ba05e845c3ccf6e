// kerneld::Status: the kernel library's error type.
//
// The codes mirror gRPC's numeric status codes so the server maps them 1:1,
// but this header depends on nothing: kernels/ must stay free of gRPC and
// protobuf so the library is reusable and testable on its own.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kerneld {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// Upper-case gRPC name of a code ("INVALID_ARGUMENT"), used in metrics labels.
std::string_view StatusCodeName(StatusCode code);

// A client's string as it may appear in a message: single-quoted, control
// and non-ASCII bytes escaped (\n, \xHH), cut to 128 bytes with "…".
// Messages echo client strings; unbounded, a 100 kB op name made a status
// larger than gRPC's 8 KiB metadata limit and failed other calls on the
// connection.
std::string Quote(std::string_view s);

// "a, b, c": the lists in messages (names, reasons).
std::string Join(const std::vector<std::string>& v, std::string_view sep = ", ");

// The same without the quotes (for values already framed, such as ids).
std::string Sanitize(std::string_view s, size_t max_bytes = 128);

// Longest status message; longer ones are cut (a backstop behind Quote).
inline constexpr size_t kMaxStatusMessage = 2048;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) {
  return {StatusCode::kInvalidArgument, std::move(msg)};
}
inline Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status FailedPrecondition(std::string msg) {
  return {StatusCode::kFailedPrecondition, std::move(msg)};
}
inline Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
inline Status ResourceExhausted(std::string msg) {
  return {StatusCode::kResourceExhausted, std::move(msg)};
}
inline Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }

#define KERNELD_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::kerneld::Status _kerneld_st = (expr);    \
    if (!_kerneld_st.ok()) return _kerneld_st; \
  } while (0)

}  // namespace kerneld
