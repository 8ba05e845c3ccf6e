// rmsnorm and fused_add_rmsnorm, CUDA: a row per block (or per warp for
// short rows), the row cached in registers so that x is read from DRAM once,
// the sum of squares reduced in float32 by warp shuffles and shared memory,
// the output rounded once. Pack<T, N> is the 128-bit vector (N = 16 /
// sizeof(T)) when the rows are aligned, else one element (scalar path).
#pragma once

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/rows.cuh"

namespace kerneld::cuda {

// y may alias x (in place): x and y are not __restrict__. Each thread reads
// its elements before it writes them, and no other thread touches them.
template <typename T, int N, int kItems>
__global__ void __launch_bounds__(1024)
    RmsNormKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
                  float bias) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units) * N;
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows;
       row0 += int64_t{gridDim.x} * blockDim.y) {
    const int64_t row = row0 + threadIdx.y;
    const bool live = row < rows;  // the block's last rows may run past the end
    const int64_t base = live ? row * units : 0;
    const P* xr = reinterpret_cast<const P*>(x) + base;
    // With few packs a thread, w is loaded with x, before the reduction: its
    // DRAM latency then overlaps the reduction's instead of following it
    // (rmsnorm 16 x 4096 float16: 4.45 -> 4.13 us). With more packs the
    // extra registers cost more than they save (large bfloat16 rows).
    constexpr bool kEarlyW = kItems == 1;
    const P* wp = reinterpret_cast<const P*>(w);
    P cache[kItems], wv[kItems];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        cache[k] = xr[u];
        if constexpr (kEarlyW) wv[k] = wp[u];
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const float f = ToFloat(cache[k].v[j]);
          ss += f * f;
        }
      }
    }
    const float scale = rsqrtf(RowSum(ss, scratch) / h + eps);
    P* yr = reinterpret_cast<P*>(y) + base;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        if constexpr (!kEarlyW) wv[k] = wp[u];
        P o;
#pragma unroll
        for (int j = 0; j < N; ++j)
          o.v[j] = FromFloat<T>(ToFloat(cache[k].v[j]) * scale * (ToFloat(wv[k].v[j]) + bias));
        yr[u] = o;
      }
    }
  }
}

// Rows too wide for the register cache: a 1024-thread block per row reads
// it twice (the second time mostly from L2).
template <typename T, int N>
__global__ void __launch_bounds__(1024)
    RmsNormWideKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int64_t units,
                      float eps, float bias) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units * N);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x) + row * units;
    float ss = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) ss += ToFloat(v.v[j]) * ToFloat(v.v[j]);
    }
    const float scale = rsqrtf(RowSum(ss, scratch) / h + eps);
    const P* wp = reinterpret_cast<const P*>(w);
    P* yr = reinterpret_cast<P*>(y) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
      const P wv = wp[u];
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j)
        o.v[j] = FromFloat<T>(ToFloat(v.v[j]) * scale * (ToFloat(wv.v[j]) + bias));
      yr[u] = o;
    }
  }
}

// s = x + residual in float32; residual_out = s rounded; x_out = rmsnorm(s)
// from the unrounded s (FlashInfer's order). The cache holds s in float32.
// In place, x_out == x and residual_out == residual: same argument as above.
template <typename T, int N, int kItems>
__global__ void __launch_bounds__(1024)
    FusedAddRmsNormKernel(const T* x, const T* res, const T* __restrict__ w, T* x_out, T* res_out,
                          int64_t rows, int units, float eps, float bias) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units) * N;
  for (int64_t row0 = int64_t{blockIdx.x} * blockDim.y; row0 < rows;
       row0 += int64_t{gridDim.x} * blockDim.y) {
    const int64_t row = row0 + threadIdx.y;
    const bool live = row < rows;
    const int64_t base = live ? row * units : 0;
    const P* xr = reinterpret_cast<const P*>(x) + base;
    const P* rr = reinterpret_cast<const P*>(res) + base;
    P* ro = reinterpret_cast<P*>(res_out) + base;
    constexpr bool kEarlyW = kItems == 1;  // as in RmsNormKernel
    const P* wp = reinterpret_cast<const P*>(w);
    P wv[kItems];
    float s[kItems][N];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P a = xr[u];
        const P b = rr[u];
        if constexpr (kEarlyW) wv[k] = wp[u];
        P o;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          s[k][j] = ToFloat(a.v[j]) + ToFloat(b.v[j]);
          ss += s[k][j] * s[k][j];
          o.v[j] = FromFloat<T>(s[k][j]);
        }
        ro[u] = o;
      }
    }
    const float scale = rsqrtf(RowSum(ss, scratch) / h + eps);
    P* xo = reinterpret_cast<P*>(x_out) + base;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        if constexpr (!kEarlyW) wv[k] = wp[u];
        P o;
#pragma unroll
        for (int j = 0; j < N; ++j)
          o.v[j] = FromFloat<T>(s[k][j] * scale * (ToFloat(wv[k].v[j]) + bias));
        xo[u] = o;
      }
    }
  }
}

// Wide rows: the first pass only sums (residual is not yet written, so the
// second pass can re-read x + residual unrounded), the second writes both.
template <typename T, int N>
__global__ void __launch_bounds__(1024)
    FusedAddRmsNormWideKernel(const T* x, const T* res, const T* __restrict__ w, T* x_out,
                              T* res_out, int64_t rows, int64_t units, float eps, float bias) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units * N);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x) + row * units;
    const P* rr = reinterpret_cast<const P*>(res) + row * units;
    float ss = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P a = xr[u];
      const P b = rr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float s = ToFloat(a.v[j]) + ToFloat(b.v[j]);
        ss += s * s;
      }
    }
    const float scale = rsqrtf(RowSum(ss, scratch) / h + eps);
    const P* wp = reinterpret_cast<const P*>(w);
    P* xo = reinterpret_cast<P*>(x_out) + row * units;
    P* ro = reinterpret_cast<P*>(res_out) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P a = xr[u];
      const P b = rr[u];
      const P wv = wp[u];
      P so, xn;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float s = ToFloat(a.v[j]) + ToFloat(b.v[j]);
        so.v[j] = FromFloat<T>(s);
        xn.v[j] = FromFloat<T>(s * scale * (ToFloat(wv.v[j]) + bias));
      }
      ro[u] = so;
      xo[u] = xn;
    }
  }
}

struct NormArgs {
  int64_t rows = 0;
  int64_t h = 0;
  float eps = 0;
  float bias = 0;
};

inline NormArgs ArgsOf(const KernelContext& ctx, const TensorView& x) {
  NormArgs a;
  a.h = x.dim(-1);
  a.rows = a.h == 0 ? 0 : x.numel() / a.h;
  a.eps = static_cast<float>(ctx.attr_f("eps"));
  a.bias = static_cast<float>(ctx.attr_f("weight_bias"));
  return a;
}

template <typename T, int N>
Status LaunchRmsNorm(const KernelContext& ctx, const T* x, const T* w, T* y, const NormArgs& a) {
  const int64_t units = a.h / N;
  const RowPlan p = PlanNormRows(a.rows, units, kMaxItems<N>, ctx.device.sm_count);
  cudaStream_t s = StreamOf(ctx);
  if (p.items == 0) {
    RmsNormWideKernel<T, N><<<p.grid, p.block, 0, s>>>(x, w, y, a.rows, units, a.eps, a.bias);
    return CheckLaunch("rmsnorm");
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    RmsNormKernel<T, N, decltype(items)::value>
        <<<p.grid, p.block, 0, s>>>(x, w, y, a.rows, static_cast<int>(units), a.eps, a.bias);
    return CheckLaunch("rmsnorm");
  });
}

template <typename T, int N>
Status LaunchFused(const KernelContext& ctx, const T* x, const T* r, const T* w, T* xo, T* ro,
                   const NormArgs& a) {
  const int64_t units = a.h / N;
  const RowPlan p = PlanNormRows(a.rows, units, kMaxItems<N>, ctx.device.sm_count);
  cudaStream_t s = StreamOf(ctx);
  if (p.items == 0) {
    FusedAddRmsNormWideKernel<T, N>
        <<<p.grid, p.block, 0, s>>>(x, r, w, xo, ro, a.rows, units, a.eps, a.bias);
    return CheckLaunch("fused_add_rmsnorm");
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    FusedAddRmsNormKernel<T, N, decltype(items)::value><<<p.grid, p.block, 0, s>>>(
        x, r, w, xo, ro, a.rows, static_cast<int>(units), a.eps, a.bias);
    return CheckLaunch("fused_add_rmsnorm");
  });
}

}  // namespace kerneld::cuda
