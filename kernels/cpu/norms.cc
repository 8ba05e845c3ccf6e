// rmsnorm, fused_add_rmsnorm, layernorm, CPU: one row at a time in float32
// (a row buffer per chunk of rows), rounded once to the dtype; rows are split
// across the pool's threads.
#include <cmath>
#include <cstdint>

#include <algorithm>
#include <vector>

#include "cpu/convert.h"
#include "cpu/cpu_kernels.h"
#include "cpu/dispatch.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

// Sums with kLanes independent partial sums: the loop vectorizes without
// reassociation flags, and the error grows like n / kLanes, not n.
constexpr int kLanes = 16;

template <typename Term>
float LaneSum(int64_t n, Term term) {
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) part[k] += term(i + k);
  for (; i < n; ++i) part[i % kLanes] += term(i);
  float s = 0.0f;
  for (float p : part) s += p;
  return s;
}

// Whole rows per ParallelFor chunk, about kElementwiseGrain elements each.
int64_t RowGrain(int64_t h) { return std::max<int64_t>(1, kElementwiseGrain / h); }

// weight (+ bias) in float32, once per request rather than once per row.
template <typename T>
std::vector<float> WeightF(const T* w, int64_t h, float bias) {
  std::vector<float> f(static_cast<size_t>(h));
  ToFloat(w, f.data(), h);
  if (bias != 0.0f)
    for (float& v : f) v += bias;
  return f;
}

// The norm's scale: rsqrt(mean(v^2) + eps), as the CUDA kernels compute it.
float RmsScale(float sum_sq, int64_t h, float eps) {
  return 1.0f / std::sqrt(sum_sq / static_cast<float>(h) + eps);
}

struct NormShape {
  int64_t rows = 0;
  int64_t h = 0;
};

NormShape RowsOf(const TensorView& x) {
  NormShape s;
  s.h = x.dim(-1);
  s.rows = s.h == 0 ? 0 : x.numel() / s.h;
  return s;
}

}  // namespace

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

Status LayerNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& g = ctx.input("gamma");
  const TensorView& b = ctx.input("beta");
  TensorView& y = ctx.output("y");
  const NormShape shape = RowsOf(x);  // not a structured binding: clang 14 cannot capture those
  const int64_t rows = shape.rows, h = shape.h;
  if (rows == 0) return Status::Ok();
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  return DispatchFloating(x.dtype, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    const std::vector<float> gv = WeightF(g.ptr<T>(), h, 0.0f);
    const std::vector<float> bv = WeightF(b.ptr<T>(), h, 0.0f);
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
        const float var = LaneSum(h, [&](int64_t i) {
                            const float c = v[i] - mean;
                            return c * c;
                          }) / fh;
        const float rstd = 1.0f / std::sqrt(var + eps);
        for (int64_t i = 0; i < h; ++i) v[i] = (v[i] - mean) * rstd * gf[i] + bf[i];
        FromFloat(v, yp + r * h, h);
      }
    });
    return Status::Ok();
  });
}

}  // namespace kerneld::cpu
