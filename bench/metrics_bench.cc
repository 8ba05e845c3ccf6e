// Request-path metrics cost: prometheus-cpp's Histogram (a mutex per
// Observe) vs kerneld's sharded AtomicHistogram, one hot series observed by
// N threads at once. Prints observations per second and the ratio.
//
//   build/bench/metrics_bench [threads] [observations per thread]
#include <prometheus/histogram.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "metrics/atomic_histogram.h"

template <typename F>
double Rate(int threads, int per_thread, F&& observe) {
  std::vector<std::thread> ts;
  auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) observe(1e-5 * ((i + t) % 1000));
    });
  for (auto& t : ts) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return threads * static_cast<double>(per_thread) / s;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  int per = argc > 2 ? std::atoi(argv[2]) : 2000000;
  prometheus::Histogram ph(kerneld::server::LatencyBucketBounds());
  kerneld::server::AtomicHistogram ah;
  double r_prom = Rate(threads, per, [&](double v) { ph.Observe(v); });
  double r_atomic = Rate(threads, per, [&](double v) { ah.Observe(v); });
  std::printf("one hot series, %d threads x %d observations\n", threads, per);
  std::printf("%-34s %14.1f M obs/s\n", "prometheus-cpp Histogram (mutex)", r_prom / 1e6);
  std::printf("%-34s %14.1f M obs/s   x%.1f\n", "kerneld AtomicHistogram (sharded)", r_atomic / 1e6, r_atomic / r_prom);
  std::printf("(the daemon needs 0.1 M obs/s per series at 100k requests/s)\n");
  return ah.Read().count == static_cast<uint64_t>(threads) * static_cast<uint64_t>(per) ? 0 : 1;
}
