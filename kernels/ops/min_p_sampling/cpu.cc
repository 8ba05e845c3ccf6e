// min_p_sampling, CPU: the row's max, the threshold min_p * max in float32,
// then an inverse-CDF draw over the kept tokens in index order. Mass is
// summed in double: the CPU backend is the reference the CUDA one is
// checked against statistically.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/cpu/sampling_rng.h"
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
  // Bad data is a client error; find it before sampling anything.
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int64_t i = 0; i < v; ++i) {
      const float x = p[r * v + i];
      if (!std::isfinite(x) || x < 0)
        return InvalidArgument("min_p_sampling: probs[" + std::to_string(r) + ", " +
                               std::to_string(i) + "] = " + std::to_string(x) +
                               " is not a finite non-negative probability");
      total += x;
    }
    if (!(total > 0))
      return InvalidArgument("min_p_sampling: probs row " + std::to_string(r) +
                             " has no positive mass");
  }
  ParallelFor(ctx.pool, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(v, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r) {
                  const float* row = p + r * v;
                  const float t = min_p * *std::max_element(row, row + v);
                  auto kept = [&](int64_t i) { return row[i] > 0 && row[i] >= t; };
                  double mass = 0;
                  for (int64_t i = 0; i < v; ++i)
                    if (kept(i)) mass += row[i];
                  const double u = Uniform(seed, static_cast<uint64_t>(r)) * mass;
                  int64_t pick = -1, last = -1;
                  double cum = 0;
                  for (int64_t i = 0; i < v; ++i) {
                    if (!kept(i)) continue;
                    last = i;
                    cum += row[i];
                    if (cum > u) {
                      pick = i;
                      break;
                    }
                  }
                  samples[r] =
                      static_cast<int32_t>(pick >= 0 ? pick : last);  // last: u rounded up to mass
                }
              });
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(min_p_sampling, cpu) {
  op.Impl("cpu", MinPSampling, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
