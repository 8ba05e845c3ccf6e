// --rate_limit: requests per second per principal, a token bucket each
// (burst: one second's worth, at least 1). A call over it is refused at once
// with RESOURCE_EXHAUSTED, before its message is parsed or any work is done.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kerneld/status.h"

namespace kerneld::server {

class RateLimiter {
 public:
  // `per_second` <= 0: no limit.
  explicit RateLimiter(double per_second);
  // OK, or RESOURCE_EXHAUSTED naming the principal, the limit and the wait.
  Status Admit(const std::string& principal);
  // The same at a given time (tests).
  Status AdmitAt(const std::string& principal, std::chrono::steady_clock::time_point now);

 private:
  struct Bucket {
    double tokens;
    std::chrono::steady_clock::time_point at;
  };
  const double rate_, burst_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace kerneld::server
