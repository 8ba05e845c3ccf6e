// merge_state, CPU: per (row, head), the two lse weighed in float32 and the
// two partial outputs mixed, rounded once. v may be v_a and s may be s_a:
// each row is read whole before it is written.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

Status MergeState(KernelContext& ctx) {
  const TensorView& va = ctx.input("v_a");
  const TensorView& vb = ctx.input("v_b");
  const float* sa = ctx.input("s_a").ptr<float>();
  const float* sb = ctx.input("s_b").ptr<float>();
  float* s = ctx.output("s").ptr<float>();
  const int64_t rows = ctx.input("s_a").numel();
  const int64_t d = va.dim(-1);
  return DispatchFloating(va.dtype, "merge_state", [&](auto tag) {
    using T = decltype(tag);
    const T* a = va.ptr<T>();
    const T* b = vb.ptr<T>();
    T* v = ctx.output("v").ptr<T>();
    ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(d, 1)),
                [&](int64_t r0, int64_t r1) {
                  std::vector<float> fa(static_cast<size_t>(d)), fb(static_cast<size_t>(d));
                  for (int64_t r = r0; r < r1; ++r) {
                    const float x = sa[r], y = sb[r], m = std::max(x, y);
                    float wa = 0, wb = 0, out = -std::numeric_limits<float>::infinity();
                    if (m != -std::numeric_limits<float>::infinity()) {
                      wa = std::exp(x - m);
                      wb = std::exp(y - m);
                      const float sum = wa + wb;
                      out = m + std::log(sum);
                      wa /= sum;
                      wb /= sum;
                    }
                    ToFloat(a + r * d, fa.data(), d);
                    ToFloat(b + r * d, fb.data(), d);
                    for (int64_t e = 0; e < d; ++e)
                      fa[static_cast<size_t>(e)] =
                          wa * fa[static_cast<size_t>(e)] + wb * fb[static_cast<size_t>(e)];
                    FromFloat(fa.data(), v + r * d, d);
                    s[r] = out;
                  }
                });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(merge_state, cpu) {
  op.Impl("cpu", MergeState, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
