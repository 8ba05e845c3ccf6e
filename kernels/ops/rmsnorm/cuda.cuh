// rmsnorm, CUDA kernels: a row per block (or per warp for short rows), the
// row cached in registers so that x is read from DRAM once, the sum of
// squares reduced in float32 by warp shuffles and shared memory, the output
// rounded once. Pack<T, N> is the 128-bit vector (N = 16 / sizeof(T)) when
// the rows are aligned, else one element (scalar path). Vector rows of 257
// to 1024 packs (hidden 2056-8192 in float16 / bfloat16, 1028-4096 in
// float32) take the launch plans of RowPlanFor below, measured in
// the rmsnorm plan sweep (the lab k17_lab.cu, last in commit 11d7ce9; bench/labs/README.md);
// the rest take the shared plan of common/cuda/rows.cuh.
//
// Framework-agnostic (FlashInfer's norm.cuh shape): raw pointers, templated
// on the element type, the launcher returns cudaError_t. The binding
// (cuda.cu) adapts the KernelContext.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda/norm_rows.cuh"
#include "common/cuda/rows.cuh"
#include "common/cuda/split_rows.cuh"
#include "common/cuda/width.cuh"

namespace kerneld::cuda::rmsnorm {

// y may alias x (in place): x and y are not __restrict__. Each thread reads
// its elements before it writes them, and no other thread touches them.
template <typename T, int N, int kItems, int64_t kUnits = 0>
__global__ void __launch_bounds__(1024)
    RmsNormKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
                  float bias) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
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
    const float scale = rsqrtf(RowSum(ss) / h + eps);
    P* yr = reinterpret_cast<P*>(y) + base;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * blockDim.x;
      if (live && u < units) {
        const P& wk = wv.Get(wp, k, u);
        yr[u] = RmsPack(cache[k], scale, wk, bias);
      }
    }
  }
}

// Rows too wide for the register cache: a 1024-thread block per row reads
// it twice (the second time mostly from L2).
template <typename T, int N, int64_t kUnits = 0>
__global__ void __launch_bounds__(1024)
    RmsNormWideKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int64_t units,
                      float eps, float bias) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x) + row * units;
    float ss = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
#pragma unroll
      for (int j = 0; j < N; ++j) ss += ToFloat(v.v[j]) * ToFloat(v.v[j]);
    }
    const float scale = rsqrtf(RowSum(ss) / h + eps);
    const P* wp = reinterpret_cast<const P*>(w);
    P* yr = reinterpret_cast<P*>(y) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P v = xr[u];
      const P wv = wp[u];
      yr[u] = RmsPack(v, scale, wv, bias);
    }
  }
}

// A row split over the blocks of a cluster (common/cuda/split_rows.cuh):
// this block's chunk of x and of the weight in registers, the sum of
// squares over the cluster, then the chunk written. y may alias x: each
// thread reads its packs before it writes them.
template <typename T, int N, int kItems, int64_t kUnits = 0, int64_t kChunk = 0>
__global__ void __launch_bounds__(kSplitMaxThreads)
    RmsNormSplitKernel(const T* x, const T* __restrict__ w, T* y, int64_t units, int64_t chunk,
                       float eps, float bias) {
  const SplitSlot slot = NormSplitSlot<kUnits, kChunk>(units, chunk);
  using P = Pack<T, N>;
  const int64_t base = slot.row * units;
  const P* xr = reinterpret_cast<const P*>(x) + base;
  const P* wp = reinterpret_cast<const P*>(w);
  P c[kItems], wv[kItems];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      c[k] = xr[u];
      wv[k] = wp[u];  // with x: its latency overlaps the reduction's
#pragma unroll
      for (int j = 0; j < N; ++j) ss += ToFloat(c[k].v[j]) * ToFloat(c[k].v[j]);
    }
  }
  const float h = static_cast<float>(units * N);
  const float scale = rsqrtf(ClusterRowSum(ss) / h + eps);
  P* yr = reinterpret_cast<P*>(y) + base;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int64_t u = slot.u0 + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < slot.u1) {
      P o;
      RmsPackInto(o, c[k], scale, wv[k], bias);
      yr[u] = o;
    }
  }
}

// ---- The lab's plans (k17_lab.cu at commit 11d7ce9, H100, 2026-11-25) ----

// How a RmsNormRowKernel block walks its rows and loads the weight.
enum class RowWalk {
  // One row a block (grid = rows); the weight pack is loaded where the
  // output is computed.
  kWeightLate,
  // One row a block; the weight pack is loaded with x, before the reduction.
  kWeightEarly,
  // grid = the blocks that fit on the GPU at once; each loads the weight into
  // registers once, and the next row's x before it reduces and writes the
  // current row, so that a row's loads overlap the previous row's reduction.
  kPersistent,
};

// Sum of v over the kThreads threads of a one-row block; every thread gets
// the total. One barrier a row instead of RowSum's two: the scratch (64
// floats) alternates halves by row parity, and a warp can only write a half
// again after every warp passed the barrier of the row in between, i.e.
// after every warp read it.
template <int kThreads>
__device__ __forceinline__ float OneRowSum(float v, float* scratch, int parity) {
  v = WarpSum(v);
  if constexpr (kThreads == 32) {
    return v;
  } else {
    float* s = scratch + parity * 32;
    const int lane = threadIdx.x & 31;
    if (lane == 0) s[threadIdx.x >> 5] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? s[lane] : 0.0f;
    return WarpSum(v);
  }
}

// The sum of squares of this thread's packs of a row (pack k at
// threadIdx.x + k * kThreads; those past `units` hold nothing).
template <typename T, int N, int kThreads, int kItems>
__device__ __forceinline__ float PackSquares(const Pack<T, N> (&c)[kItems], int units) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    if (threadIdx.x + k * kThreads < units) {
#pragma unroll
      for (int j = 0; j < N; ++j) ss += ToFloat(c[k].v[j]) * ToFloat(c[k].v[j]);
    }
  }
  return ss;
}

// This thread's packs of an output row: x * scale * (w + bias), rounded once.
template <typename T, int N, int kThreads, int kItems>
__device__ __forceinline__ void WriteScaledPacks(Pack<T, N>* yrow, const Pack<T, N> (&c)[kItems],
                                                 const Pack<T, N> (&wv)[kItems], int units,
                                                 float scale, float bias) {
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int u = threadIdx.x + k * kThreads;
    if (u < units) yrow[u] = RmsPack(c[k], scale, wv[k], bias);
  }
}

// One row a block of kThreads threads (1-D), kItems packs a thread, pack k
// of a thread at threadIdx.x + k * kThreads; __launch_bounds__ asks for
// kMinBlocks resident blocks an SM (at most 64 registers a thread here).
// The lab's RmsVar (k17_lab.cu at commit 11d7ce9), with weight_bias. y may alias x: each thread
// reads its packs of a row before it writes them, and rows are disjoint.
template <typename T, int N, int kThreads, int kItems, int kMinBlocks, RowWalk kWalk,
          int64_t kUnits = 0>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    RmsNormRowKernel(const T* x, const T* __restrict__ w, T* y, int64_t rows, int units, float eps,
                     float bias) {
  const float h = NormWidth<kUnits, N>(units);
  using P = Pack<T, N>;
  __shared__ float scratch[64];
  const P* xp = reinterpret_cast<const P*>(x);
  const P* wp = reinterpret_cast<const P*>(w);
  P* yp = reinterpret_cast<P*>(y);
  int parity = 0;
  if constexpr (kWalk != RowWalk::kPersistent) {
    constexpr bool kEarly = kWalk == RowWalk::kWeightEarly;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
      const int64_t base = row * units;
      P c[kItems], wv[kItems];
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) {
          c[k] = xp[base + u];
          if constexpr (kEarly) wv[k] = wp[u];
        }
      }
      const float ss = PackSquares<T, N, kThreads, kItems>(c, units);
      const float scale = rsqrtf(OneRowSum<kThreads>(ss, scratch, parity) / h + eps);
      parity ^= 1;
      if constexpr (!kEarly) {
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int u = threadIdx.x + k * kThreads;
          if (u < units) wv[k] = wp[u];
        }
      }
      WriteScaledPacks<T, N, kThreads, kItems>(yp + base, c, wv, units, scale, bias);
    }
  } else {
    P wv[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int u = threadIdx.x + k * kThreads;
      if (u < units) wv[k] = wp[u];
    }
    P c[kItems];
    int64_t row = blockIdx.x;
    if (row < rows) {
#pragma unroll
      for (int k = 0; k < kItems; ++k) {
        const int u = threadIdx.x + k * kThreads;
        if (u < units) c[k] = xp[row * units + u];
      }
    }
    for (; row < rows; row += gridDim.x) {
      const int64_t next = row + gridDim.x;
      P n[kItems];
      if (next < rows) {
#pragma unroll
        for (int k = 0; k < kItems; ++k) {
          const int u = threadIdx.x + k * kThreads;
          if (u < units) n[k] = xp[next * units + u];
        }
      }
      const float ss = PackSquares<T, N, kThreads, kItems>(c, units);
      const float scale = rsqrtf(OneRowSum<kThreads>(ss, scratch, parity) / h + eps);
      parity ^= 1;
      WriteScaledPacks<T, N, kThreads, kItems>(yp + row * units, c, wv, units, scale, bias);
#pragma unroll
      for (int k = 0; k < kItems; ++k) c[k] = n[k];
    }
  }
}

#ifndef __CUDACC_RTC__  // the launchers: host code, which NVRTC does not compile
// Which lab plan a vector row takes: t<threads>i<packs a thread>b<min
// blocks an SM> as in the lab's variant names (k17_lab.cu at commit 11d7ce9) (P: persistent).
enum class LabPlan {
  kNone,           // the shared plan (PlanNormRows)
  kT256I2B4P,      // "t256i2b4 PR"
  kT512I2B2Early,  // "t512i2b2 w"
  kT256I4B4,       // "t256i4b4"
};

// The plan of a vector row of `units` 16-byte packs. The lab (k17_lab.cu at commit 11d7ce9) timed
// float16 and bfloat16 rows of 512 and 1024 packs beside a copy of the same
// bytes and beside the shared plan (k17_lab --ops rmsnorm, H100, CUDA
// events, L2 read-flushed, median of 30; x copy, float16 / bfloat16):
//   257-512 packs (hidden 4096): "t256i2b4 PR" at every row count. 4096 x
//     4096: 1.009 / 1.065 (shared plan 0.901 / 0.945; best variant 1.011 /
//     1.070); 16 x 4096: 4.42 / 4.42 us (best 4.38 / 4.38, shared plan 4.42 /
//     4.45); 1 x 4096: 4.22 / 4.22 us, the best (shared plan 4.38 / 4.38).
//     The prefetch of the next row is what reaches copy at mid: the same
//     block without it ("t256i2b4 w") 0.962 / 1.023. Variants with 4 packs a
//     thread (128 threads) tie at mid but take 4.6-6.2 us at 1-16 rows.
//   513-1024 packs (hidden 8192), GPU full of rows (rows >= 4 x SMs, the
//     shared plan's test): "t256i4b4". 32768 x 8192: 1.005 / 1.006, the best
//     (shared plan, the same 256 x 4 packs: 0.989 / 0.954).
//   513-1024 packs, fewer rows: "t512i2b2 w". 64 x 8192: 4.64 / 4.70 us, the
//     best (shared plan, 1024 threads x 1 pack: 5.06 / 5.09; t256i4b4 6.2 us,
//     and t512i2b2 w at 32768 x 8192 0.963 / 0.958 x copy).
// A pack is 16 bytes in every dtype: float32 rows of the same byte width
// (hidden 1028-4096) take the same plans, unmeasured in the lab. Narrower
// and wider rows, and the scalar path, keep the shared plan.
inline LabPlan RowPlanFor(int64_t rows, int64_t units, int sm_count) {
  if (units <= 256 || units > 1024) return LabPlan::kNone;
  if (units <= 512) return LabPlan::kT256I2B4P;
  const bool many_rows = sm_count > 0 && rows >= 4 * int64_t{sm_count};
  return many_rows ? LabPlan::kT256I4B4 : LabPlan::kT512I2B2Early;
}

// Blocks of `kernel` resident on one SM (occupancy), or `fallback` when the
// runtime cannot say; the failed query's error is cleared so that the
// launch after it does not report it.
template <typename K>
int ResidentBlocksPerSm(K kernel, int threads, int fallback) {
  int occ = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, 0) != cudaSuccess ||
      occ <= 0) {
    (void)cudaGetLastError();
    return fallback;
  }
  return occ;
}

template <typename T, int N, int kThreads, int kItems, int kMinBlocks, RowWalk kWalk>
cudaError_t LaunchRowKernel(const T* x, const T* w, T* y, int64_t rows, int64_t units, float eps,
                            float bias, int sm_count, cudaStream_t stream) {
  auto* kernel = RmsNormRowKernel<T, N, kThreads, kItems, kMinBlocks, kWalk>;
  int64_t grid = rows;
  if constexpr (kWalk == RowWalk::kPersistent) {
    // Every block resident at once, as the lab ran it (float16 5 blocks an
    // SM, bfloat16 4). Queried once per kernel: the register count is fixed
    // at build time.
    static const int occ = ResidentBlocksPerSm(kernel, kThreads, kMinBlocks);
    if (sm_count > 0) grid = std::min<int64_t>(rows, int64_t{occ} * sm_count);
  }
  grid = std::clamp<int64_t>(grid, 1, 0x7fffffff);
  kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, w, y, rows,
                                                               static_cast<int>(units), eps, bias);
  return cudaGetLastError();
}

template <typename T, int N>
cudaError_t LaunchRmsNorm(const T* x, const T* w, T* y, int64_t rows, int64_t h, float eps,
                          float bias, int sm_count, int cc, cudaStream_t stream) {
  const int64_t units = h / N;
  if (const auto e = LaunchPlannedSplitRows<T, N>(
          rows, units, sm_count, cc, [&](auto items, const SplitRowPlan& sp, bool* launched) {
            return LaunchSplitRows(RmsNormSplitKernel<T, N, decltype(items)::value>, sp, rows,
                                   stream, launched, x, w, y, units, sp.chunk, eps, bias);
          }))
    return *e;
  if constexpr (N > 1) {
    switch (RowPlanFor(rows, units, sm_count)) {
      case LabPlan::kT256I2B4P:
        return LaunchRowKernel<T, N, 256, 2, 4, RowWalk::kPersistent>(x, w, y, rows, units, eps,
                                                                      bias, sm_count, stream);
      case LabPlan::kT512I2B2Early:
        return LaunchRowKernel<T, N, 512, 2, 2, RowWalk::kWeightEarly>(x, w, y, rows, units, eps,
                                                                       bias, sm_count, stream);
      case LabPlan::kT256I4B4:
        return LaunchRowKernel<T, N, 256, 4, 4, RowWalk::kWeightLate>(x, w, y, rows, units, eps,
                                                                      bias, sm_count, stream);
      case LabPlan::kNone:
        break;
    }
  }
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
// (RowPlanFor, else PlanNormRows) and the persistent grid; with cc (the
// compute capability, major * 10 + minor) 90 or more, few wide rows are
// split over clusters (PlanSplitRows).
template <typename T>
cudaError_t RmsNorm(const T* x, const T* w, T* y, int64_t rows, int64_t h, float eps, float bias,
                    int sm_count, int cc, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(h, {x, w, y}))
    return LaunchRmsNorm<T, kVecN<T>>(x, w, y, rows, h, eps, bias, sm_count, cc, stream);
  return LaunchRmsNorm<T, 1>(x, w, y, rows, h, eps, bias, sm_count, cc, stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::rmsnorm
