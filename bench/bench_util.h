// Small timing helpers shared by the host-side benchmarks.
#pragma once

#include <algorithm>
#include <chrono>
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

}  // namespace kerneld::bench
