// scale, CPU: y = x * factor, in float32, rounded once to x's dtype.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "common/cpu/small_host.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// Convert a block to float32, multiply, convert back: the conversions are
// vectorized (F16C for float16), the multiply is a plain float loop. In
// place (y == x) is fine: each block is read before it is written.
template <typename T>
void ScaleRange(const T* x, T* y, float f, int64_t b, int64_t e) {
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = b; i < e; ++i) y[i] = x[i] * f;
  } else {
    float buf[kConvertBlock];
    for (int64_t i = b; i < e; i += kConvertBlock) {
      const int64_t n = std::min<int64_t>(kConvertBlock, e - i);
      ToFloat(x + i, buf, n);
      for (int64_t k = 0; k < n; ++k) buf[k] *= f;
      FromFloat(buf, y + i, n);
    }
  }
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
    ParallelFor(ctx.pool, n, kElementwiseGrain,
                [&](int64_t b, int64_t e) { ScaleRange(xp, yp, f, b, e); });
    return Status::Ok();
  });
}

KERNELD_IMPL(scale, cpu) {
  op.Impl("cpu", Scale, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
