#include "auth/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kerneld::server {

namespace {
// Buckets kept before full ones (idle principals, the same as new) are swept.
constexpr size_t kSweepAbove = 4096;
}  // namespace

RateLimiter::RateLimiter(double per_second)
    : rate_(per_second), burst_(std::max(1.0, per_second)) {}

Status RateLimiter::Admit(const std::string& principal) {
  return AdmitAt(principal, std::chrono::steady_clock::now());
}

Status RateLimiter::AdmitAt(const std::string& principal,
                            std::chrono::steady_clock::time_point now) {
  if (rate_ <= 0) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  auto refill = [&](Bucket& b) {
    const double dt = std::chrono::duration<double>(now - b.at).count();
    if (dt > 0) {
      b.tokens = std::min(burst_, b.tokens + dt * rate_);
      b.at = now;
    }
  };
  if (buckets_.size() > kSweepAbove) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      refill(it->second);
      it = it->second.tokens >= burst_ ? buckets_.erase(it) : std::next(it);
    }
  }
  auto [it, fresh] = buckets_.try_emplace(principal, Bucket{burst_, now});
  Bucket& b = it->second;
  if (!fresh) refill(b);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return Status::Ok();
  }
  const double wait_ms = std::ceil((1 - b.tokens) / rate_ * 1000);
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", rate_);
  return ResourceExhausted("principal " + Quote(principal) + " is over --rate_limit=" + rate +
                           " requests/s; retry in " +
                           std::to_string(static_cast<int64_t>(wait_ms)) +
                           " ms, or ask the operator to raise the limit");
}

}  // namespace kerneld::server
