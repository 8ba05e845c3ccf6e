// Small timing, summary and data helpers shared by the host-side
// benchmarks. No gRPC here: the service benches' client side is in
// bench_client.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kerneld/percentile.h"

namespace kerneld::bench {

template <typename F>
double MedianSeconds(int reps, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

using ::kerneld::Percentile;

inline double UsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}
inline double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The figures a latency table reports of a sample (in its unit).
struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};
inline Latency Summarize(const std::vector<double>& v) {
  return {Percentile(v, 0.5), Percentile(v, 0.99), Percentile(v, 1.0)};
}

// `s` inside a JSON string's quotes: a record's text fields (a GPU's name,
// a device id) come from the daemon and may hold anything.
inline std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

// `n` float32 values uniform in [lo, hi), as an inline tensor's bytes
// (little-endian, as on every host kerneld runs on). The service benches
// link no kernel library (its CUDA fatbin would ride along in the bundle),
// so they make their own data.
inline std::string RandomFloats(int64_t n, std::mt19937_64& rng, float lo = -2, float hi = 2) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::string b(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = u(rng);
    std::memcpy(&b[static_cast<size_t>(i) * 4], &v, 4);
  }
  return b;
}
// The same from a generator of its own: the same bytes every run.
inline std::string RandomFloats(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return RandomFloats(n, rng);
}

}  // namespace kerneld::bench
