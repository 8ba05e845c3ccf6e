// Pieces of the CPU norms (rmsnorm, fused_add_rmsnorm, layernorm): lane
// sums, row grain, the weight in float32, the rms scale, the rows of x.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "kerneld/tensor.h"

namespace kerneld::cpu {

// Sums with kLanes independent partial sums: the loop vectorizes without
// reassociation flags, and the error grows like n / kLanes, not n.
inline constexpr int kLanes = 16;

template <typename Term>
float LaneSum(int64_t n, Term term) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) part[k] += term(i + k);
  for (; i < n; ++i) part[i % kLanes] += term(i);
  float s = 0.0f;
  for (float p : part) s += p;
  return s;
}

// Whole rows per ParallelFor chunk, about kElementwiseGrain elements each.
inline int64_t RowGrain(int64_t h) { return std::max<int64_t>(1, kElementwiseGrain / h); }

// weight (+ bias) in float32, once per request rather than once per row.
template <typename T>
std::vector<float> WeightF(const T* w, int64_t h, float bias) {
  std::vector<float> f(static_cast<size_t>(h));
  ToFloat(w, f.data(), h);
  if (bias != 0.0f)
    for (float& v : f) v += bias;
  return f;
}

// The norm's scale: rsqrt(mean(v^2) + eps), as the CUDA kernels compute it.
inline float RmsScale(float sum_sq, int64_t h, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(h) + eps);
}

struct NormShape {
  int64_t rows = 0;
  int64_t h = 0;
};

inline NormShape RowsOf(const TensorView& x) {
  NormShape s;
  s.h = x.dim(-1);
  s.rows = s.h == 0 ? 0 : x.numel() / s.h;
  return s;
}

}  // namespace kerneld::cpu
