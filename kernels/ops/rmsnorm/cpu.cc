// rmsnorm, CPU: one row at a time in float32 (a row buffer per chunk of
// rows), rounded once to the dtype; rows are split across the pool's threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/cpu/row_norm.h"
#include "common/cpu/small_host.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

Status RmsNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& w = ctx.input("weight");
  TensorView& y = ctx.output("y");
  const NormShape shape = RowsOf(x);  // not a structured binding: clang 14 cannot capture those
  const int64_t rows = shape.rows, h = shape.h;
  if (rows == 0) return Status::Ok();
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  const float bias = static_cast<float>(ctx.attr_f("weight_bias"));
  return DispatchFloating(x.dtype, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    const std::vector<float> wv = WeightF(w.ptr<T>(), h, bias);
    const float* wf = wv.data();
    // y may be x: a row is fully read into buf before it is written.
    ParallelFor(ctx.pool, rows, RowGrain(h), [&](int64_t r0, int64_t r1) {
      std::vector<float> buf(static_cast<size_t>(h));
      float* v = buf.data();
      for (int64_t r = r0; r < r1; ++r) {
        ToFloat(xp + r * h, v, h);
        const float scale = RmsScale(LaneSum(h, [&](int64_t i) { return v[i] * v[i]; }), h, eps);
        for (int64_t i = 0; i < h; ++i) v[i] = v[i] * scale * wf[i];
        FromFloat(v, yp + r * h, h);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(rmsnorm, cpu) {
  op.Impl("cpu", RmsNorm, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
