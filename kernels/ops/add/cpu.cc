// add, CPU: y = a + b, in float32, rounded once to the dtype.
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

// Blocks of both inputs go to float32 and back, as in scale. y may be a:
// each block is read into the buffers before it is written.
template <typename T>
void AddRange(const T* a, const T* b, T* y, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
  } else {
    float fa[kConvertBlock];
    float fb[kConvertBlock];
    for (int64_t i = begin; i < end; i += kConvertBlock) {
      const int64_t n = std::min<int64_t>(kConvertBlock, end - i);
      ToFloat(a + i, fa, n);
      ToFloat(b + i, fb, n);
      for (int64_t k = 0; k < n; ++k) fa[k] += fb[k];
      FromFloat(fa, y + i, n);
    }
  }
}

}  // namespace

Status Add(KernelContext& ctx) {
  const TensorView& a = ctx.input("a");
  const TensorView& b = ctx.input("b");
  TensorView& y = ctx.output("y");
  const int64_t n = a.numel();
  return DispatchFloating(a.dtype, "add", [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.ptr<T>();
    const T* bp = b.ptr<T>();
    T* yp = y.ptr<T>();
    ParallelFor(ctx.pool, n, kElementwiseGrain,
                [&](int64_t lo, int64_t hi) { AddRange(ap, bp, yp, lo, hi); });
    return Status::Ok();
  });
}

KERNELD_IMPL(add, cpu) {
  op.Impl("cpu", Add, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
