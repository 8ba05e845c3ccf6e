// scale, CPU: y = x * factor, in float32, rounded once to x's dtype.
#include <cstdint>

#include "cpu/cpu_kernels.h"
#include "cpu/dispatch.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

template <typename T>
void ScaleRange(const T* __restrict x, T* __restrict y, float f, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = FromFloat<T>(ToFloat(x[i]) * f);
}

// In place (y == x) the __restrict promise above would be false; this version
// makes no such promise and still vectorizes (each element is read then written).
template <typename T>
void ScaleRangeInPlace(T* y, float f, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = FromFloat<T>(ToFloat(y[i]) * f);
}

}  // namespace

Status Scale(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const float f = static_cast<float>(ctx.attr_f("factor"));
  const int64_t n = x.numel();
  return DispatchFloating(x.dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    const bool in_place = static_cast<const void*>(xp) == static_cast<void*>(yp);
    ParallelFor(ctx.pool, n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      if (in_place) {
        ScaleRangeInPlace(yp, f, b, e);
      } else {
        ScaleRange(xp, yp, f, b, e);
      }
    });
    return Status::Ok();
  });
}

}  // namespace kerneld::cpu
