// rmsnorm's float64 reference, shared with fused_add_rmsnorm (the same norm
// of x + residual). Where a kernel rounds an intermediate to the dtype
// (fused_add_rmsnorm's residual), the reference rounds it the same way.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "kerneld/reference.h"

namespace kerneld {

// rmsnorm, and fused_add_rmsnorm when `fused`: s = x + residual, residual =
// round(s), x = rmsnorm(s) from the unrounded s (FlashInfer's order).
inline bool RmsNormReference(const std::string& op, bool fused, const HostTensors& in,
                             const AttrMap& attrs, HostTensors* out, std::string* error) {
  const HostTensor* x = RefInput(in, "x", op, error);
  const HostTensor* w = RefInput(in, "weight", op, error);
  const HostTensor* r = fused ? RefInput(in, "residual", op, error) : nullptr;
  if (!x || !w || (fused && !r)) return false;
  int64_t rows = 0, h = 0;
  if (!RefRows(*x, op, &rows, &h, error)) return false;
  // The kernels see eps and weight_bias as floats.
  const double eps = static_cast<float>(AttrOr(attrs, "eps", 1e-6));
  const double bias = static_cast<float>(AttrOr(attrs, "weight_bias", 0.0));
  HostTensor y = *x;
  HostTensor res = fused ? *r : HostTensor{};
  std::vector<double> s(static_cast<size_t>(h));
  for (int64_t row = 0; row < rows; ++row) {
    const size_t o = static_cast<size_t>(row * h);
    double ss = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = x->values[o + i] + (fused ? r->values[o + i] : 0.0);
      if (fused) res.values[o + i] = RoundTo(res.dtype, s[i]);
      ss += s[i] * s[i];
    }
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(h) + eps);
    for (size_t i = 0; i < s.size(); ++i) y.values[o + i] = s[i] * scale * (w->values[i] + bias);
  }
  if (fused) {
    (*out)["x"] = std::move(y);
    (*out)["residual"] = std::move(res);
  } else {
    (*out)["y"] = std::move(y);
  }
  return true;
}

}  // namespace kerneld
