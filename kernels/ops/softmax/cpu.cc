// softmax, CPU: per row, max-subtracted exponentials summed in float32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/cpu/convert.h"
#include "common/cpu/dispatch.h"
#include "common/cpu/small_host.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// Independent partial sums: a short dependency chain per accumulator keeps
// the float32 rounding error of a 50k-term sum near that of a tree (and the
// loop vectorizes).
constexpr int kLanes = 16;

template <typename T>
void SoftmaxRow(const T* x, float* y, int64_t v, float scale) {
  // Pass 1: the row max, on float32 copies of the logits (written into y,
  // which later receives the probabilities anyway).
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < v; i += kConvertBlock) {
    const int64_t n = std::min(kConvertBlock, v - i);
    ToFloat(x + i, y + i, n);
    for (int64_t j = 0; j < n; ++j) m = std::max(m, y[i + j]);
  }
  // Pass 2: exponentials and their sum.
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= v; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float e = std::exp((y[i + j] - m) * scale);
      y[i + j] = e;
      acc[j] += e;
    }
  }
  for (; i < v; ++i) {
    y[i] = std::exp((y[i] - m) * scale);
    acc[i % kLanes] += y[i];
  }
  // Tree over the lanes.
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  // Pass 3: normalize.
  const float inv = 1.0f / acc[0];
  for (int64_t j = 0; j < v; ++j) y[j] *= inv;
}

}  // namespace

Status Softmax(KernelContext& ctx) {
  const TensorView& x = ctx.input("logits");
  TensorView& y = ctx.output("probs");
  const int64_t rows = x.dim(0), v = x.dim(1);
  const float scale = static_cast<float>(1.0 / ctx.attr_f("temperature"));
  return DispatchFloating(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    float* yp = y.ptr<float>();
    ParallelFor(ctx.pool, rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(v, 1)),
                [&](int64_t b, int64_t e) {
                  for (int64_t r = b; r < e; ++r) SoftmaxRow(xp + r * v, yp + r * v, v, scale);
                });
    return Status::Ok();
  });
}

KERNELD_IMPL(softmax, cpu) {
  op.Impl("cpu", Softmax, Requirements::Cpu(), kPriorityFallback);
  RankSmallHostFirst(op);  // linear in bytes: small host requests stay here
}

}  // namespace kerneld::cpu
