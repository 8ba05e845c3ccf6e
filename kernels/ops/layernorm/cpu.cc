// layernorm, CPU: one row at a time in float32 (a row buffer per chunk of
// rows), rounded once to the dtype; rows are split across the pool's threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/cpu/row_norm.h"
#include "common/cpu/small_host.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"
#include "ops/layernorm/args.h"

namespace kerneld::cpu {

namespace {

Status LayerNorm(KernelContext& ctx) {
  const layernorm::LayerNormArgs a = layernorm::LayerNormArgsOf(ctx);
  const NormShape shape = RowsOf(a.x);  // not a structured binding: clang 14 cannot capture those
  const int64_t rows = shape.rows, h = shape.h;
  if (rows == 0) return Status::Ok();
  const float eps = a.eps;
  return DispatchFloating(a.x.dtype, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = a.x.ptr<T>();
    T* yp = a.y.ptr<T>();
    const std::vector<float> gv = WeightF(a.gamma.ptr<T>(), h, 0.0f);
    const std::vector<float> bv = WeightF(a.beta.ptr<T>(), h, 0.0f);
    const float* gf = gv.data();
    const float* bf = bv.data();
    ParallelFor(ctx.pool, rows, RowGrain(h), [&](int64_t r0, int64_t r1) {
      std::vector<float> buf(static_cast<size_t>(h));
      float* v = buf.data();
      const float fh = static_cast<float>(h);
      for (int64_t r = r0; r < r1; ++r) {
        ToFloat(xp + r * h, v, h);
        // Two passes over the cached row: the variance of the centred values
        // does not cancel catastrophically the way E[x^2] - mean^2 does.
        const float mean = LaneSum(h, [&](int64_t i) { return v[i]; }) / fh;
        const float var = LaneSum(h,
                                  [&](int64_t i) {
                                    const float c = v[i] - mean;
                                    return c * c;
                                  }) /
                          fh;
        const float rstd = 1.0f / std::sqrt(var + eps);
        for (int64_t i = 0; i < h; ++i) v[i] = (v[i] - mean) * rstd * gf[i] + bf[i];
        FromFloat(v, yp + r * h, h);
      }
    });
    return Status::Ok();
  });
}

}  // namespace

KERNELD_IMPL(layernorm, cpu) {
  op.Impl("cpu", LayerNorm, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
