// The p-quantile (p in [0, 1]) of a sample, nearest rank: latency tables in
// kernelctl and the benchmarks use this one definition, so their p50 and p99
// mean the same thing.
#pragma once

#include <algorithm>
#include <vector>

namespace kerneld {

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace kerneld
