// rmsnorm, CUDA kernels: a row per block (or per warp for short rows), the
// row cached in registers so that x is read from DRAM once, the sum of
// squares reduced in float32 by warp shuffles and shared memory, the output
// rounded once. Pack<T, N> is the 128-bit vector (N = 16 / sizeof(T)) when
// the rows are aligned, else one element (scalar path).
//
// Framework-agnostic (FlashInfer's norm.cuh shape): raw pointers, templated
// on the element type, the launcher returns cudaError_t. The binding
// (cuda.cu) adapts the KernelContext.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/rows.cuh"

namespace kerneld::cuda::rmsnorm {

// y may alias x (in place): x and y are not __restrict__. Each thread reads
// its elements before it writes them, and no other thread touches them.
template <typename T, int N, int kItems>
__global__ void __launch_bounds__(1024)
    RmsNormKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
                  float bias) {
  using P = Pack<T, N>;
  __shared__ float scratch[kRowScratch];
  const float h = static_cast<float>(units) * N;
  for (int64_t row0 = FirstBlockRow(); row0 < rows; row0 += BlockRowStride()) {
    const auto [live, base] = RowSlot(row0, rows, units);
    const P* xr = reinterpret_cast<const P*>(x) + base;
    const P* wp = reinterpret_cast<const P*>(w);
    P cache[kItems];
    RowWeights<P, kItems> wv;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        cache[k] = xr[u];
        wv.LoadEarly(wp, k, u);
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
        const P& wk = wv.Get(wp, k, u);
        P o;
#pragma unroll
        for (int j = 0; j < N; ++j)
          o.v[j] = FromFloat<T>(ToFloat(cache[k].v[j]) * scale * (ToFloat(wk.v[j]) + bias));
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

template <typename T, int N>
cudaError_t LaunchRmsNorm(const T* x, const T* w, T* y, int64_t rows, int64_t h, float eps,
                          float bias, int sm_count, cudaStream_t stream) {
  const int64_t units = h / N;
  const RowPlan p = PlanNormRows(rows, units, kMaxItems<N>, sm_count);
  if (p.items == 0) {
    RmsNormWideKernel<T, N><<<p.grid, p.block, 0, stream>>>(x, w, y, rows, units, eps, bias);
    return cudaGetLastError();
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    RmsNormKernel<T, N, decltype(items)::value>
        <<<p.grid, p.block, 0, stream>>>(x, w, y, rows, static_cast<int>(units), eps, bias);
    return cudaGetLastError();
  });
}

// y = x / rms(x) * (w + bias) over rows of h elements, on `stream`; y may
// equal x. x, y are [rows, h], w is [h]. sm_count picks the row plan
// (PlanNormRows).
template <typename T>
cudaError_t RmsNorm(const T* x, const T* w, T* y, int64_t rows, int64_t h, float eps, float bias,
                    int sm_count, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(h, {x, w, y}))
    return LaunchRmsNorm<T, kVecN<T>>(x, w, y, rows, h, eps, bias, sm_count, stream);
  return LaunchRmsNorm<T, 1>(x, w, y, rows, h, eps, bias, sm_count, stream);
}

}  // namespace kerneld::cuda::rmsnorm
