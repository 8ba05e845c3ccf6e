// A lock-free histogram for the request path.
//
// prometheus-cpp's Histogram takes a mutex on every Observe, so one hot
// series (one op on one device) serializes every worker thread. Here an
// observation is two relaxed atomic increments on one of kShards
// cache-line-separated shards picked by thread; Collect sums the shards.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kerneld::server {

// Log-spaced bounds, 5 us to ~10 s (factor 2): fixed, so series from every
// replica aggregate.
inline const std::vector<double>& LatencyBucketBounds() {
  static const std::vector<double> b = [] {
    std::vector<double> v;
    for (double x = 5e-6; x < 10.5; x *= 2) v.push_back(x);
    return v;
  }();
  return b;
}

class AtomicHistogram {
 public:
  static constexpr int kBuckets = 22;  // LatencyBucketBounds().size()
  static constexpr int kShards = 8;

  void Observe(double seconds) {
    Shard& s = shards_[ShardIndex()];
    int b = 0;
    const auto& bounds = LatencyBucketBounds();
    while (b < kBuckets && seconds > bounds[static_cast<size_t>(b)]) ++b;  // b == kBuckets: +Inf
    s.counts[static_cast<size_t>(b)].fetch_add(1, std::memory_order_relaxed);
    s.sum_ns.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  }

  struct Snapshot {
    std::array<uint64_t, kBuckets + 1> counts{};  // per bucket, not cumulative
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot Read() const {
    Snapshot out;
    uint64_t sum_ns = 0;
    for (const Shard& s : shards_) {
      for (size_t b = 0; b < out.counts.size(); ++b) out.counts[b] += s.counts[b].load(std::memory_order_relaxed);
      sum_ns += s.sum_ns.load(std::memory_order_relaxed);
    }
    for (uint64_t c : out.counts) out.count += c;
    out.sum = static_cast<double>(sum_ns) * 1e-9;
    return out;
  }

 private:
  static size_t ShardIndex() {
    static thread_local const size_t idx = std::hash<std::thread::id>{}(std::this_thread::get_id()) % kShards;
    return idx;
  }
  struct alignas(64) Shard {
    std::array<std::atomic<uint64_t>, kBuckets + 1> counts{};
    std::atomic<uint64_t> sum_ns{0};
  };
  std::array<Shard, kShards> shards_;
};

}  // namespace kerneld::server
