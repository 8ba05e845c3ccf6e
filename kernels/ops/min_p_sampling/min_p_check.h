// min_p_sampling's documented support, for its unit and gpu tests: p_j > 0
// and p_j >= min_p * max(p), the threshold in float32 as the kernels have it.
#pragma once

#include <algorithm>
#include <vector>

namespace kerneld::testing {

inline std::vector<bool> MinPSupport(const std::vector<double>& p, double min_p) {
  const float t =
      static_cast<float>(min_p) * static_cast<float>(*std::max_element(p.begin(), p.end()));
  std::vector<bool> keep(p.size());
  for (size_t j = 0; j < p.size(); ++j) keep[j] = p[j] > 0 && static_cast<float>(p[j]) >= t;
  return keep;
}

}  // namespace kerneld::testing
