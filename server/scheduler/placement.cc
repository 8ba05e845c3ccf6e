#include "scheduler/placement.h"

#include <algorithm>

namespace kerneld::server {

namespace {
int64_t WaitNs(const DeviceLoad& d) {
  const int threads = std::max(1, d.threads);
  if (d.load < threads || d.pending_ns <= 0) return 0;
  return d.pending_ns / d.load * (d.load - threads + 1) / threads;
}
}  // namespace

int64_t ExpectedFinishNs(const DeviceLoad& d) { return WaitNs(d) + d.latency_ns + d.transfer_ns; }

int ChooseDevice(absl::Span<const DeviceLoad> devices) {
  auto fits = [](const DeviceLoad& d) {
    return d.eligible && (d.free_bytes < 0 || d.need_bytes + kMemoryHeadroomBytes <= d.free_bytes);
  };
  // A device not measured yet is taken to be as fast as the measured mean:
  // it is neither avoided forever nor flooded before its first result.
  int64_t known_sum = 0, known = 0;
  for (const DeviceLoad& d : devices)
    if (fits(d) && d.latency_ns > 0) known_sum += d.latency_ns, ++known;
  const int64_t assumed = known > 0 ? known_sum / known : 0;
  int best = -1;
  int64_t best_finish = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceLoad& d = devices[i];
    if (!fits(d)) continue;
    const int64_t latency = d.latency_ns > 0 ? d.latency_ns : assumed;
    const int64_t finish = WaitNs(d) + latency + d.transfer_ns;
    bool better = best < 0 || finish < best_finish;
    if (!better && finish == best_finish) {
      // Equal: fewer tasks per thread (cross-multiplied, no division).
      const DeviceLoad& b = devices[static_cast<size_t>(best)];
      better = int64_t{d.load} * std::max(1, b.threads) < int64_t{b.load} * std::max(1, d.threads);
    }
    if (better) best = static_cast<int>(i), best_finish = finish;
  }
  return best;
}

}  // namespace kerneld::server
