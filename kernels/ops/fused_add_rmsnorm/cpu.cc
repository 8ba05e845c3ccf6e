// fused_add_rmsnorm, CPU: one row at a time in float32 (a row buffer per chunk of
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

Status FusedAddRmsNorm(KernelContext& ctx) {
  // Read from the inputs, write to the outputs: in place they are the same
  // memory (each row is read before it is written), and the kernel does not
  // rely on that.
  const TensorView& x = ctx.input("x");
  const TensorView& res = ctx.input("residual");
  const TensorView& w = ctx.input("weight");
  TensorView& x_out = ctx.output("x");
  TensorView& res_out = ctx.output("residual");
  const NormShape shape = RowsOf(x);  // not a structured binding: clang 14 cannot capture those
  const int64_t rows = shape.rows, h = shape.h;
  if (rows == 0) return Status::Ok();
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  const float bias = static_cast<float>(ctx.attr_f("weight_bias"));
  return DispatchFloating(x.dtype, "fused_add_rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    const T* rp = res.ptr<T>();
    T* xo = x_out.ptr<T>();
    T* ro = res_out.ptr<T>();
    const std::vector<float> wv = WeightF(w.ptr<T>(), h, bias);
    const float* wf = wv.data();
    ParallelFor(ctx.pool, rows, RowGrain(h), [&](int64_t r0, int64_t r1) {
      std::vector<float> sum(static_cast<size_t>(h)), other(static_cast<size_t>(h));
      float* s = sum.data();
      float* o = other.data();
      for (int64_t r = r0; r < r1; ++r) {
        ToFloat(xp + r * h, s, h);
        ToFloat(rp + r * h, o, h);
        for (int64_t i = 0; i < h; ++i) s[i] += o[i];
        // residual gets the rounded sum; the norm uses the float32 sum
        // (FlashInfer's order), so x is rounded only once.
        FromFloat(s, ro + r * h, h);
        const float scale = RmsScale(LaneSum(h, [&](int64_t i) { return s[i] * s[i]; }), h, eps);
        for (int64_t i = 0; i < h; ++i) s[i] = s[i] * scale * wf[i];
        FromFloat(s, xo + r * h, h);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(fused_add_rmsnorm, cpu) {
  op.Impl("cpu", FusedAddRmsNorm, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
