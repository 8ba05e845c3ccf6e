// The float64 reference of the gated activations (silu_and_mul,
// gelu_and_mul, gelu_tanh_and_mul): y[..., d] = act(x[..., :d]) * x[..., d:].
#pragma once

#include <string>

#include "kerneld/reference.h"

namespace kerneld {

template <typename Act>
bool ActAndMulReference(const std::string& op, const HostTensors& in, HostTensors* out,
                        std::string* error, Act act) {
  const HostTensor* x = RefInput(in, "x", op, error);
  if (!x) return false;
  int64_t rows = 0, h = 0;
  if (!RefRows(*x, op, &rows, &h, error)) return false;
  if (h % 2 != 0) return *error = op + ": x's last dim must be even", false;
  const int64_t d = h / 2;
  HostTensor y;
  y.dtype = x->dtype;
  y.shape = x->shape;
  y.shape.back() = d;
  y.values.resize(static_cast<size_t>(rows * d));
  for (int64_t row = 0; row < rows; ++row) {
    const double* xr = x->values.data() + row * h;
    double* yr = y.values.data() + row * d;
    for (int64_t i = 0; i < d; ++i) yr[i] = act(xr[i]) * xr[d + i];
  }
  (*out)["y"] = std::move(y);
  return true;
}

}  // namespace kerneld
