// Placement by expected finish (server/scheduler/placement.h) on simulated
// devices: 1, 2 and 8 of different speeds, one unhealthy, one full.
#include "scheduler/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

namespace kerneld::server {
namespace {

struct SimDevice {
  int64_t latency_ns;  // what one request takes there (as measured)
  int threads = 1;
  bool healthy = true;
};

struct SimResult {
  std::vector<int> placed;    // requests per device
  double mean_completion_ns;  // arrival to finish
  int64_t p99_completion_ns;
  int64_t makespan_ns;
};

// Requests arrive every gap_ns; each device runs `threads` at once, FIFO.
// `choose` sees what a worker publishes: the estimates of its tasks not yet
// finished, their count, and its measured latency.
SimResult Simulate(const std::vector<SimDevice>& devs, int n, int64_t gap_ns,
                   const std::function<int(absl::Span<const DeviceLoad>)>& choose) {
  const size_t nd = devs.size();
  std::vector<std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>>> free_at(nd);
  for (size_t d = 0; d < nd; ++d)
    for (int t = 0; t < devs[d].threads; ++t) free_at[d].push(0);
  std::vector<std::vector<int64_t>> finishes(nd);  // of tasks placed there
  SimResult r{std::vector<int>(nd, 0), 0, 0, 0};
  double total = 0;
  std::vector<int64_t> completions;
  for (int i = 0; i < n; ++i) {
    const int64_t now = i * gap_ns;
    std::vector<DeviceLoad> loads(nd);
    for (size_t d = 0; d < nd; ++d) {
      auto& f = finishes[d];
      f.erase(std::remove_if(f.begin(), f.end(), [&](int64_t x) { return x <= now; }), f.end());
      loads[d].eligible = devs[d].healthy;
      loads[d].threads = devs[d].threads;
      loads[d].load = static_cast<int>(f.size());
      loads[d].pending_ns = static_cast<int64_t>(f.size()) * devs[d].latency_ns;
      loads[d].latency_ns = devs[d].latency_ns;
    }
    const int d = choose(loads);
    EXPECT_GE(d, 0);
    if (d < 0) break;
    const size_t du = static_cast<size_t>(d);
    const int64_t start = std::max(now, free_at[du].top());
    free_at[du].pop();
    const int64_t finish = start + devs[du].latency_ns;
    free_at[du].push(finish);
    finishes[du].push_back(finish);
    ++r.placed[du];
    total += static_cast<double>(finish - now);
    completions.push_back(finish - now);
    r.makespan_ns = std::max(r.makespan_ns, finish);
  }
  r.mean_completion_ns = total / n;
  std::sort(completions.begin(), completions.end());
  r.p99_completion_ns = completions[completions.size() * 99 / 100];
  return r;
}

// Today's rule before this one: the fewest tasks queued or running.
int LeastLoaded(absl::Span<const DeviceLoad> l) {
  int best = -1;
  for (size_t i = 0; i < l.size(); ++i)
    if (l[i].eligible && (best < 0 || l[i].load < l[static_cast<size_t>(best)].load))
      best = static_cast<int>(i);
  return best;
}

TEST(Placement, OneDeviceTakesEverythingAndNoneIsMinusOne) {
  const auto r = Simulate({{100'000}}, 50, 10'000, ChooseDevice);
  EXPECT_EQ(r.placed[0], 50);
  DeviceLoad down;
  down.eligible = false;
  EXPECT_EQ(ChooseDevice(std::vector<DeviceLoad>{down}), -1);
  EXPECT_EQ(ChooseDevice(std::vector<DeviceLoad>{}), -1);
}

TEST(Placement, TwoDevicesByExpectedFinish) {
  // 100 us and 300 us a request, one stream each (capacity: one per 75 us).
  const std::vector<SimDevice> devs = {{100'000}, {300'000}};
  // Light load (a request every 120 us): the fast one alone keeps up, and
  // takes everything; counting tasks sends a third to the slow one.
  auto r = Simulate(devs, 4000, 120'000, ChooseDevice);
  auto ll = Simulate(devs, 4000, 120'000, LeastLoaded);
  EXPECT_EQ(r.placed[0], 4000);
  EXPECT_LE(r.mean_completion_ns, ll.mean_completion_ns);
  // Overload (one per 40 us, a burst): work goes about 3/4 to the fast one,
  // in proportion to speed, and the burst ends sooner with half the tail.
  r = Simulate(devs, 4000, 40'000, ChooseDevice);
  ll = Simulate(devs, 4000, 40'000, LeastLoaded);
  const double fast = r.placed[0] / 4000.0;
  EXPECT_GT(fast, 0.70) << r.placed[0] << " / " << r.placed[1];
  EXPECT_LT(fast, 0.80) << r.placed[0] << " / " << r.placed[1];
  EXPECT_LT(r.makespan_ns, ll.makespan_ns * 0.8);
  EXPECT_LT(r.p99_completion_ns, ll.p99_completion_ns * 0.7);
  // Idle and equal: the first; equal finish: fewer tasks per thread.
  std::vector<DeviceLoad> l(2);
  EXPECT_EQ(ChooseDevice(l), 0);
  l[0].load = 1;
  EXPECT_EQ(ChooseDevice(l), 1);
}

TEST(Placement, EightDevicesOfDifferentSpeedsOneUnhealthy) {
  std::vector<SimDevice> devs;
  for (int i = 0; i < 8; ++i) devs.push_back({100'000 * (1 + i % 4), 2});  // 100-400 us
  devs[3].healthy = false;  // one of the slowest kind
  double capacity = 0;      // requests per ns the healthy ones can take
  for (const auto& d : devs)
    if (d.healthy) capacity += d.threads / static_cast<double>(d.latency_ns);
  const int n = 20000;
  auto at = [&](double load, auto choose) {
    return Simulate(devs, n, static_cast<int64_t>(1 / (load * capacity)), choose);
  };
  // 90% of the healthy devices' capacity: the unhealthy one gets nothing, a
  // faster device never gets less than a slower one, the work keeps up, and
  // the tail is no worse than counting tasks.
  auto r = at(0.9, ChooseDevice);
  auto ll = at(0.9, LeastLoaded);
  EXPECT_EQ(r.placed[3], 0);
  for (size_t i = 0; i < devs.size(); ++i)
    for (size_t j = 0; j < devs.size(); ++j)
      if (devs[i].healthy && devs[j].healthy && devs[i].latency_ns < devs[j].latency_ns)
        EXPECT_GE(r.placed[i], r.placed[j]) << i << " vs " << j;
  EXPECT_LT(r.makespan_ns - (n - 1) * static_cast<int64_t>(1 / (0.9 * capacity)), 2'000'000);
  EXPECT_LE(r.p99_completion_ns, ll.p99_completion_ns);
  // Half load: every request on a fastest device.
  r = at(0.5, ChooseDevice);
  EXPECT_EQ(r.placed[0] + r.placed[4], n);
  EXPECT_LT(r.mean_completion_ns, at(0.5, LeastLoaded).mean_completion_ns * 0.7);
  // Overload: each healthy device busy to the end, in proportion to speed
  // (within 15%), and the burst done sooner than counting tasks does it.
  r = at(1.2, ChooseDevice);
  ll = at(1.2, LeastLoaded);
  for (size_t i = 0; i < devs.size(); ++i) {
    if (!devs[i].healthy) continue;
    const double ideal = devs[i].threads / static_cast<double>(devs[i].latency_ns) / capacity;
    EXPECT_NEAR(r.placed[i] / static_cast<double>(n), ideal, ideal * 0.15) << "device " << i;
  }
  EXPECT_LT(r.makespan_ns, ll.makespan_ns * 0.9);
  EXPECT_LT(r.p99_completion_ns, ll.p99_completion_ns * 0.7);
}

TEST(Placement, MemoryHeadroomAndUnmeasuredDevices) {
  std::vector<DeviceLoad> l(2);
  l[0].latency_ns = 10;  // faster
  l[1].latency_ns = 1000;
  l[0].free_bytes = kMemoryHeadroomBytes + 100;
  l[0].need_bytes = 101;  // would eat into the headroom
  l[1].free_bytes = -1;   // unknown: not checked
  l[1].need_bytes = int64_t{1} << 40;
  EXPECT_EQ(ChooseDevice(l), 1);
  l[0].need_bytes = 100;
  EXPECT_EQ(ChooseDevice(l), 0);
  // Transfer counts: 10 + 2000 > 1000.
  l[0].transfer_ns = 2000;
  EXPECT_EQ(ChooseDevice(l), 1);
  // A device not measured yet is taken as the mean of the measured ones:
  // not flooded (it would be with 0) and not avoided.
  std::vector<DeviceLoad> m(2);
  m[0].latency_ns = 1000;
  m[0].load = 5;
  m[0].pending_ns = 5000;  // waits for 5 tasks of 1000: finish 6000
  m[1].latency_ns = 0;     // assumed 1000
  m[1].load = 2;
  m[1].pending_ns = 8000;  // waits for 2 of 4000: finish 9000
  EXPECT_EQ(ChooseDevice(m), 0);
  m[1].threads = 4;  // a free thread: no wait, finish 1000
  EXPECT_EQ(ChooseDevice(m), 1);
  EXPECT_EQ(ExpectedFinishNs(m[0]), 6000);
}

}  // namespace
}  // namespace kerneld::server
