// The gated activations on the CPU (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul): y = act(gate) * up in
// float32, rounded once to the dtype. x's rows are [gate (d) | up (d)].
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/activation_math.h"
#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

// Rows [r0, r1): both halves of a row go to float32 a block at a time.
template <typename T, typename Act>
void ActAndMulRows(const T* x, T* y, int64_t d, int64_t r0, int64_t r1, Act act) {
  float gate[kConvertBlock];
  float up[kConvertBlock];
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * 2 * d;
    T* yr = y + r * d;
    for (int64_t c = 0; c < d; c += kConvertBlock) {
      const int64_t n = std::min<int64_t>(kConvertBlock, d - c);
      ToFloat(xr + c, gate, n);
      ToFloat(xr + d + c, up, n);
      for (int64_t k = 0; k < n; ++k) gate[k] = act(gate[k]) * up[k];
      FromFloat(gate, yr + c, n);
    }
  }
}

template <typename Act>
Status ActAndMul(KernelContext& ctx, const char* name, Act act) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const int64_t d = y.dim(-1);
  if (y.numel() == 0) return Status::Ok();
  const int64_t rows = y.numel() / d;
  // Whole rows per chunk, about kElementwiseGrain outputs each.
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / d);
  return DispatchFloating(x.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    ParallelFor(ctx.pool, rows, grain,
                [&](int64_t r0, int64_t r1) { ActAndMulRows(xp, yp, d, r0, r1, act); });
    return Status::Ok();
  });
}

}  // namespace kerneld::cpu
