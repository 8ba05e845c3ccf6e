// libprotobuf's log, through kerneld's own (metrics/daemon_log.h) and rate
// limited: a client's malformed messages (a string that is not UTF-8) made
// libprotobuf write an ERROR line each, 4.4 MB of stderr for 20,000 calls.
// At most kLibraryLogBurst lines at once and kLibraryLogPerSecond a second
// after that; the next line that is written says how many were dropped.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace kerneld::server {

inline constexpr double kLibraryLogPerSecond = 5;
inline constexpr double kLibraryLogBurst = 20;

// Installs the handler once per process (idempotent).
void RouteLibraryLogs();

// The limiter behind it: whether a line at `now` is written, and if so how
// many were dropped before it (tests).
class LogRateLimit {
 public:
  LogRateLimit(double per_second, double burst)
      : rate_(per_second), burst_(burst), tokens_(burst) {}
  bool Admit(std::chrono::steady_clock::time_point now, uint64_t* dropped_before);

 private:
  const double rate_, burst_;
  double tokens_;
  std::chrono::steady_clock::time_point at_{};
  uint64_t dropped_ = 0;
};

}  // namespace kerneld::server
