// min_p_sampling, CPU: the row's max, the threshold min_p * max in float32,
// then an inverse-CDF draw over the kept tokens in index order
// (common/cpu/sampling.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cpu/sampling.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

Status MinPSampling(KernelContext& ctx) {
  const TensorView& probs = ctx.input("probs");
  TensorView& out = ctx.output("samples");
  const int64_t rows = probs.dim(0), v = probs.dim(1);
  const float min_p = static_cast<float>(ctx.attr_f("min_p"));
  const uint64_t seed = static_cast<uint64_t>(ctx.attr_i("seed"));
  const float* p = probs.ptr<float>();
  int32_t* samples = out.ptr<int32_t>();
  KERNELD_RETURN_IF_ERROR(CheckProbRows("min_p_sampling", p, rows, v));
  ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(v, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  const float* row = p + r * v;
                  const float t = min_p * *std::max_element(row, row + v);
                  samples[r] = DrawAbove(row, v, t, seed, static_cast<uint64_t>(r));
                }
              });
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(min_p_sampling, cpu) {
  op.Impl("cpu", MinPSampling, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
