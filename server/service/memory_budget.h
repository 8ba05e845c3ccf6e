// Bytes of request memory the daemon holds at once (inline inputs it keeps,
// inline outputs it builds, staging copies), bounded by --max_inflight_mb.
// A request reserves its share before anything is allocated and gives it
// back when its response has been sent; over budget it is answered
// RESOURCE_EXHAUSTED, so many large concurrent calls cannot grow RSS without
// bound.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace kerneld::server {

class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t limit) : limit_(limit) {}

  // Held bytes, released on destruction.
  class Lease {
   public:
    Lease() = default;
    Lease(MemoryBudget* b, int64_t n) : budget_(b), bytes_(n) {}
    Lease(Lease&& o) noexcept : budget_(std::exchange(o.budget_, nullptr)), bytes_(o.bytes_) {}
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        Reset();
        budget_ = std::exchange(o.budget_, nullptr);
        bytes_ = o.bytes_;
      }
      return *this;
    }
    ~Lease() { Reset(); }
    void Reset() {
      if (budget_ != nullptr) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
      budget_ = nullptr;
    }

   private:
    MemoryBudget* budget_ = nullptr;
    int64_t bytes_ = 0;
  };

  // True and *lease set when n more bytes fit under the limit.
  bool TryReserve(int64_t n, Lease* lease) {
    int64_t cur = used_.load(std::memory_order_relaxed);
    do {
      if (n > limit_ - cur) return false;
    } while (!used_.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    *lease = Lease(this, n);
    return true;
  }

  int64_t used() const { return used_.load(std::memory_order_relaxed); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

}  // namespace kerneld::server
