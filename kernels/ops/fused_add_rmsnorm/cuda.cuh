// fused_add_rmsnorm, CUDA kernels: s = x + residual in float32;
// residual_out = s rounded; x_out = rmsnorm(s) from the unrounded s
// (FlashInfer's order). The shape of rmsnorm's kernels (ops/rmsnorm/cuda.cuh):
// a row per block or per warp, the row (here s, in float32) cached in
// registers, float32 reductions, one rounding.
//
// Framework-agnostic: raw pointers, templated on the element type, the
// launcher returns cudaError_t. The binding (cuda.cu) adapts the
// KernelContext.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/norm_rows.cuh"
#include "common/cuda/rows.cuh"
#include "common/cuda/split_rows.cuh"
#include "common/cuda/width.cuh"

namespace kerneld::cuda::fused_add_rmsnorm {

// s = a + b in float32, kept for the output pass, its squares added to *ss;
// returns s rounded to T (residual_out).
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> AddPacks(const Pack<T, N>& a, const Pack<T, N>& b,
                                               float (&s)[N], float* ss) {
  Pack<T, N> o;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    s[j] = ToFloat(a.v[j]) + ToFloat(b.v[j]);
    *ss += s[j] * s[j];
    o.v[j] = FromFloat<T>(s[j]);
  }
  return o;
}

// In place, x_out == x and residual_out == residual: not __restrict__. Each
// thread reads its elements before it writes them, and no other thread
// touches them.
template <typename T, int N, int kItems, int64_t kUnits = 0>
__global__ void __launch_bounds__(1024)
    FusedAddRmsNormKernel(const T* x, const T* res, const T* __restrict__ w, T* x_out, T* res_out,
                          int64_t rows, int units, float eps, float bias) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
  for (int64_t row0 = FirstBlockRow(); row0 < rows; row0 += BlockRowStride()) {
    const auto [live, base] = RowSlot(row0, rows, units);
    const P* xr = reinterpret_cast<const P*>(x) + base;
    const P* rr = reinterpret_cast<const P*>(res) + base;
    P* ro = reinterpret_cast<P*>(res_out) + base;
    const P* wp = reinterpret_cast<const P*>(w);
    RowWeights<P, kItems> wv;
    float s[kItems][N];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P a = xr[u];
        const P b = rr[u];
        wv.LoadEarly(wp, k, u);
        ro[u] = AddPacks(a, b, s[k], &ss);
      }
    }
    const float scale = rsqrtf(RowSum(ss) / h + eps);
    P* xo = reinterpret_cast<P*>(x_out) + base;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P& wk = wv.Get(wp, k, u);
        xo[u] = RmsPack(s[k], scale, wk, bias);
      }
    }
  }
}

// Wide rows: the first pass only sums (residual is not yet written, so the
// second pass can re-read x + residual unrounded), the second writes both.
template <typename T, int N, int64_t kUnits = 0>
__global__ void __launch_bounds__(1024)
    FusedAddRmsNormWideKernel(const T* x, const T* res, const T* __restrict__ w, T* x_out,
                              T* res_out, int64_t rows, int64_t units, float eps, float bias) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
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
    const float scale = rsqrtf(RowSum(ss) / h + eps);
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

// A row split over the blocks of a cluster (common/cuda/split_rows.cuh):
// this block's chunk of s = x + residual kept in float32 registers
// (residual_out written from it), the sum of squares over the cluster, then
// the chunk of x_out. In place is safe as in FusedAddRmsNormKernel.
template <typename T, int N, int kItems, int64_t kUnits = 0, int64_t kChunk = 0>
__global__ void __launch_bounds__(kSplitMaxThreads)
    FusedAddRmsNormSplitKernel(const T* x, const T* res, const T* __restrict__ w, T* x_out,
                               T* res_out, int64_t units, int64_t chunk, float eps, float bias) {
  const SplitSlot slot = NormSplitSlot<kUnits, kChunk>(units, chunk);
  using P = Pack<T, N>;
  const int64_t base = slot.row * units;
  const P* xr = reinterpret_cast<const P*>(x) + base;
  const P* rr = reinterpret_cast<const P*>(res) + base;
  const P* wp = reinterpret_cast<const P*>(w);
  P* ro = reinterpret_cast<P*>(res_out) + base;
  float s[kItems][N];
  P wv[kItems];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      const P a = xr[u];
      const P b = rr[u];
      wv[k] = wp[u];
      ro[u] = AddPacks(a, b, s[k], &ss);
    }
  }
  const float h = static_cast<float>(units * N);
  const float scale = rsqrtf(ClusterRowSum(ss) / h + eps);
  P* xo = reinterpret_cast<P*>(x_out) + base;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      xo[u] = RmsPack(s[k], scale, wv[k], bias);
    }
  }
}

#ifndef __CUDACC_RTC__  // the launchers: host code, which NVRTC does not compile
template <typename T, int N>
cudaError_t LaunchFused(const T* x, const T* r, const T* w, T* xo, T* ro, int64_t rows, int64_t h,
                        float eps, float bias, int sm_count, int cc, cudaStream_t stream) {
  const int64_t units = h / N;
  if (const auto e = LaunchPlannedSplitRows<T, N>(
          rows, units, sm_count, cc, [&](auto items, const SplitRowPlan& sp, bool* launched) {
            return LaunchSplitRows(FusedAddRmsNormSplitKernel<T, N, decltype(items)::value>, sp,
                                   rows, stream, launched, x, r, w, xo, ro, units, sp.chunk, eps,
                                   bias);
          }))
    return *e;
  const RowPlan p = PlanNormRows(rows, units, kMaxItems<N>, sm_count);
  if (p.items == 0) {
    FusedAddRmsNormWideKernel<T, N>
        <<<p.grid, p.block, 0, stream>>>(x, r, w, xo, ro, rows, units, eps, bias);
    return cudaGetLastError();
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    FusedAddRmsNormKernel<T, N, decltype(items)::value>
        <<<p.grid, p.block, 0, stream>>>(x, r, w, xo, ro, rows, static_cast<int>(units), eps, bias);
    return cudaGetLastError();
  });
}

// res_out = x + residual; x_out = rmsnorm(x + residual) * (w + bias), over
// rows of h elements on `stream`. x, residual, x_out, res_out are
// [rows, h] (x_out may equal x, res_out residual), w is [h]. sm_count picks
// the row plan (PlanNormRows); with cc (major * 10 + minor) 90 or more, few
// wide rows are split over clusters (PlanSplitRows).
template <typename T>
cudaError_t FusedAddRmsNorm(const T* x, const T* residual, const T* w, T* x_out, T* res_out,
                            int64_t rows, int64_t h, float eps, float bias, int sm_count, int cc,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(h, {x, residual, w, x_out, res_out}))
    return LaunchFused<T, kVecN<T>>(x, residual, w, x_out, res_out, rows, h, eps, bias, sm_count,
                                    cc, stream);
  return LaunchFused<T, 1>(x, residual, w, x_out, res_out, rows, h, eps, bias, sm_count, cc,
                           stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::fused_add_rmsnorm
