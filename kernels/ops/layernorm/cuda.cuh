// layernorm, CUDA kernels: the shape of rmsnorm's (ops/rmsnorm/cuda.cuh: a
// row per block or per warp, the row cached in registers, float32
// reductions, one rounding) with two reductions: the mean, then the
// variance of the centred cached values, which does not cancel the way
// E[x^2] - mean^2 can.
//
// Half types are bound by occupancy, not by their two reductions: at 56-64
// registers a thread (1024-thread launch bounds) an SM keeps 1024 threads
// and the kernel ran at 0.84 x copy bandwidth on the H100; with rows of up
// to 1024 vectors taken two vectors a thread by blocks of at most 512
// threads bounded to 32 registers (4 blocks, 2048 threads an SM) it runs
// at 0.98 (32768 x 8192) and 0.91-1.0 (4096 x 4096). Pairs convert with one
// instruction (ToFloat2 / FromFloat2), and y = (x - mean) * (rstd * g) + b
// is one FMA.
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

namespace kerneld::cuda::layernorm {

// Launch bounds of the two instantiations: any block up to 1024 threads, or
// the full-occupancy one for blocks up to 512 (see the top of the file).
inline constexpr int kOccThreads = 512;
inline constexpr int kOccBlocks = 4;

// y may alias x: not __restrict__ (each thread reads its elements first).
template <typename T, int N, int kItems, int kMaxThreads, int kMinBlocks, int64_t kUnits = 0>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocks)
    LayerNormKernel(const T* x, const T* __restrict__ gamma, const T* __restrict__ beta, T* y,
                    int64_t rows, int units, float eps) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
  // Pairs of elements where the pack has them (the vector path).
  constexpr int kStep = N % 2 == 0 ? 2 : 1;
  for (int64_t row0 = FirstBlockRow(); row0 < rows; row0 += BlockRowStride()) {
    const auto [live, base] = RowSlot(row0, rows, units);
    const P* xr = reinterpret_cast<const P*>(x) + base;
    P cache[kItems];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        cache[k] = xr[u];
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 f = ToFloat2(&cache[k].v[j]);
            sum += f.x + f.y;
          } else {
            sum += ToFloat(cache[k].v[j]);
          }
        }
      }
    }
    const float mean = RowSum(sum) / h;
    float dev = 0.0f;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 f = ToFloat2(&cache[k].v[j]);
            const float c0 = f.x - mean, c1 = f.y - mean;
            dev = fmaf(c0, c0, fmaf(c1, c1, dev));
          } else {
            const float c = ToFloat(cache[k].v[j]) - mean;
            dev = fmaf(c, c, dev);
          }
        }
      }
    }
    const float rstd = rsqrtf(RowSum(dev) / h + eps);
    const P* gp = reinterpret_cast<const P*>(gamma);
    const P* bp = reinterpret_cast<const P*>(beta);
    P* yr = reinterpret_cast<P*>(y) + base;
    // gamma and beta load here, not early as rmsnorm's weight (RowWeights):
    // two more packs a thread would cost the occupancy this kernel is bound by.
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P g = gp[u];
        const P b = bp[u];
        P o;
#pragma unroll
        for (int j = 0; j < N; j += kStep) {
          if constexpr (kStep == 2) {
            const float2 xf = ToFloat2(&cache[k].v[j]);
            const float2 gf = ToFloat2(&g.v[j]);
            const float2 bf = ToFloat2(&b.v[j]);
            FromFloat2(make_float2(fmaf(xf.x - mean, rstd * gf.x, bf.x),
                                   fmaf(xf.y - mean, rstd * gf.y, bf.y)),
                       &o.v[j]);
          } else {
            o.v[j] = FromFloat<T>(
                fmaf(ToFloat(cache[k].v[j]) - mean, rstd * ToFloat(g.v[j]), ToFloat(b.v[j])));
          }
        }
        yr[u] = o;
      }
    }
  }
}

// Rows too wide for the register cache: three passes over the row (mean,
// variance, output), the later ones mostly from L2.
template <typename T, int N, int64_t kUnits = 0>
__global__ void __launch_bounds__(1024)
    LayerNormWideKernel(const T* x, const T* __restrict__ gamma, const T* __restrict__ beta, T* y,
                        int64_t rows, int64_t units, float eps) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x) + row * units;
    float sum = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) sum += ToFloat(v.v[j]);
    }
    const float mean = RowSum(sum) / h;
    float dev = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float c = ToFloat(v.v[j]) - mean;
        dev += c * c;
      }
    }
    const float rstd = rsqrtf(RowSum(dev) / h + eps);
    const P* gp = reinterpret_cast<const P*>(gamma);
    const P* bp = reinterpret_cast<const P*>(beta);
    P* yr = reinterpret_cast<P*>(y) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
      const P g = gp[u];
      const P b = bp[u];
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j)
        o.v[j] = FromFloat<T>((ToFloat(v.v[j]) - mean) * rstd * ToFloat(g.v[j]) + ToFloat(b.v[j]));
      yr[u] = o;
    }
  }
}

// A row split over the blocks of a cluster (common/cuda/split_rows.cuh):
// this block's chunk of x, gamma and beta in registers (few rows: the
// registers are there), the mean and then the squared deviations summed
// over the cluster (two passes over the cached chunk, as LayerNormKernel),
// then the chunk written. y may alias x: each thread reads its packs first.
template <typename T, int N, int kItems, int64_t kUnits = 0, int64_t kChunk = 0>
__global__ void __launch_bounds__(kSplitMaxThreads)
    LayerNormSplitKernel(const T* x, const T* __restrict__ gamma, const T* __restrict__ beta, T* y,
                         int64_t units, int64_t chunk, float eps) {
  const SplitSlot slot = NormSplitSlot<kUnits, kChunk>(units, chunk);
  using P = Pack<T, N>;
  const P* xr = reinterpret_cast<const P*>(x) + slot.row * units;
  const P* gp = reinterpret_cast<const P*>(gamma);
  const P* bp = reinterpret_cast<const P*>(beta);
  P c[kItems], g[kItems], b[kItems];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      c[k] = xr[u];
      g[k] = gp[u];
      b[k] = bp[u];
#pragma unroll
      for (int j = 0; j < N; ++j) sum += ToFloat(c[k].v[j]);
    }
  }
  const float h = static_cast<float>(units * N);
  const float mean = ClusterRowSum(sum) / h;
  float dev = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float d = ToFloat(c[k].v[j]) - mean;
        dev = fmaf(d, d, dev);
      }
    }
  }
  const float rstd = rsqrtf(ClusterRowSum(dev) / h + eps);
  P* yr = reinterpret_cast<P*>(y) + slot.row * units;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j)
        o.v[j] = FromFloat<T>(
            fmaf(ToFloat(c[k].v[j]) - mean, rstd * ToFloat(g[k].v[j]), ToFloat(b[k].v[j])));
      yr[u] = o;
    }
  }
}

#ifndef __CUDACC_RTC__  // the launchers: host code, which NVRTC does not compile
template <typename T, int N>
cudaError_t Launch(const T* x, const T* g, const T* b, T* y, int64_t rows, int64_t h, float eps,
                   int sm_count, int cc, cudaStream_t stream) {
  const int64_t units = h / N;
  if (const auto e = LaunchPlannedSplitRows<T, N>(
          rows, units, sm_count, cc, [&](auto items, const SplitRowPlan& sp, bool* launched) {
            return LaunchSplitRows(LayerNormSplitKernel<T, N, decltype(items)::value>, sp, rows,
                                   stream, launched, x, g, b, y, units, sp.chunk, eps);
          }))
    return *e;
  // Half-type vector rows of up to 1024 packs: at most two packs a thread,
  // blocks of at most 512 threads, full occupancy.
  if constexpr (N > 1 && sizeof(T) == 2) {
    if (units <= 2 * kOccThreads) {
      // One pack a thread while the GPU is not full of rows (decode shapes:
      // the row's loads over the most threads), else two.
      const bool few_rows = rows < 4 * int64_t{sm_count};
      const RowPlan p =
          PlanRowsWithItems(rows, units, units <= (few_rows ? kOccThreads : 128) ? 1 : 2);
      return DispatchItems<2>(p.items, [&](auto items) {
        LayerNormKernel<T, N, decltype(items)::value, kOccThreads, kOccBlocks>
            <<<p.grid, p.block, 0, stream>>>(x, g, b, y, rows, static_cast<int>(units), eps);
        return cudaGetLastError();
      });
    }
  }
  const RowPlan p = PlanNormRows(rows, units, kMaxItems<N>, sm_count);
  if (p.items == 0) {
    LayerNormWideKernel<T, N><<<p.grid, p.block, 0, stream>>>(x, g, b, y, rows, units, eps);
    return cudaGetLastError();
  }
  return DispatchItems<kMaxItems<N>>(p.items, [&](auto items) {
    LayerNormKernel<T, N, decltype(items)::value, 1024, 1>
        <<<p.grid, p.block, 0, stream>>>(x, g, b, y, rows, static_cast<int>(units), eps);
    return cudaGetLastError();
  });
}

// y = (x - mean) / sqrt(var + eps) * gamma + beta over rows of h elements,
// on `stream`; y may equal x. x, y are [rows, h], gamma and beta [h].
// sm_count picks the row plan; with cc (major * 10 + minor) 90 or more,
// few wide rows are split over clusters (PlanSplitRows).
template <typename T>
cudaError_t LayerNorm(const T* x, const T* gamma, const T* beta, T* y, int64_t rows, int64_t h,
                      float eps, int sm_count, int cc, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(h, {x, gamma, beta, y}))
    return Launch<T, kVecN<T>>(x, gamma, beta, y, rows, h, eps, sm_count, cc, stream);
  return Launch<T, 1>(x, gamma, beta, y, rows, h, eps, sm_count, cc, stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::layernorm
