// softmax, CUDA kernels: probs[r, :] = softmax(x[r, :] * scale), float32
// arithmetic, any input type T, output type TO (the op writes float32).
// Framework-agnostic (model: ops/scale/cuda.cuh): raw pointers, launchers
// return cudaError_t; the binding (cuda.cu) adapts the KernelContext.
//
// Two paths, picked by ChoosePlan (below):
//  - per row: one block a row. Rows up to kRowCapacity (16384) elements are
//    cached in registers (read once, written once); longer rows stream (an
//    online (max, sum) pass, then a pass that re-reads the row from L2).
//  - split row (sm_90+): each row split over the C blocks of a thread-block
//    cluster. Each block caches its chunk in registers, reduces its own
//    (max, sum), and the C partials are merged through distributed shared
//    memory (two cluster barriers); each block then writes its chunk. With
//    one block a row, a decode batch (1-64 rows) leaves most SMs idle: 16 x
//    128256 float16 ran at 0.21 x copy (H100); split over clusters of 8-16
//    blocks every SM takes part.
// Packs are N = 4 elements when every row start of x and y is pack-aligned
// (vocab % 4 == 0 and aligned bases), single elements otherwise (odd vocab
// such as 50257, misaligned views).
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/vec.cuh"
#include "common/cuda/width.cuh"

#ifndef __CUDACC_RTC__  // the launchers' includes: host code, which NVRTC does not compile
#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "ops/softmax/plan.h"
#endif  // __CUDACC_RTC__

namespace kerneld::cuda::softmax {

// The register-cached kernels' block bound: plan.h's kMaxThreads, which the
// JIT form (NVRTC, without plan.h's host headers) cannot include.
inline constexpr int kBlockBound = 512;
#ifndef __CUDACC_RTC__
static_assert(kBlockBound == kMaxThreads, "the kernels' bound is the plan's");
#endif  // __CUDACC_RTC__

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// Stores N consecutive values converted to TO: 16-byte stores for float
// when N is a multiple of 4 (the caller's plan makes p aligned to the pack).
template <typename TO, int N>
__device__ __forceinline__ void StorePack(TO* p, const float* v) {
  if constexpr (std::is_same_v<TO, float> && N % 4 == 0) {
#pragma unroll
    for (int j = 0; j < N; j += 4)
      *reinterpret_cast<float4*>(p + j) = make_float4(v[j], v[j + 1], v[j + 2], v[j + 3]);
  } else {
    Pack<TO, N> o;
#pragma unroll
    for (int j = 0; j < N; ++j) o.v[j] = FromFloat<TO>(v[j]);
    *reinterpret_cast<Pack<TO, N>*>(p) = o;
  }
}

// Merges two online-softmax states (max m, sum s of exp((x - m) * scale)).
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2, float scale) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;  // both empty
  s = s * __expf((m - mm) * scale) + s2 * __expf((m2 - mm) * scale);
  m = mm;
}

__device__ __forceinline__ void WarpMerge(float& m, float& s, float scale) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    Merge(m, s, m2, s2, scale);
  }
}

// ---------------------------------------------------------------------------
// Per-row kernels.

// The row in registers: thread t holds packs t, t + blockDim, ... (coalesced).
template <typename T, typename TO, int N, int kItems, int64_t kVocab = 0>
__global__ void __launch_bounds__(kBlockBound)
    SoftmaxRegKernel(const T* __restrict__ x, TO* __restrict__ y, int64_t rows, int64_t vocab,
                     float scale) {
  vocab = Width<kVocab>(vocab);
  namespace bo = blockops;
  __shared__ float scratch[32];
  const int64_t units = vocab / N;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Pack<T, N>* xr = reinterpret_cast<const Pack<T, N>*>(x + r * vocab);
    float v[kItems][N];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
      if (u < units) {
        const Pack<T, N> p = xr[u];
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = ToFloat(p.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] = -INFINITY;
      }
#pragma unroll
      for (int j = 0; j < N; ++j) m = fmaxf(m, v[i][j]);
    }
    m = bo::Max(m, -INFINITY, scratch);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[i][j] = u < units ? __expf((v[i][j] - m) * scale) : 0.0f;
        s += v[i][j];
      }
    }
    const float inv = 1.0f / bo::Sum(s, scratch);
    TO* yr = y + r * vocab;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t u = threadIdx.x + int64_t{i} * blockDim.x;
      if (u < units) {
#pragma unroll
        for (int j = 0; j < N; ++j) v[i][j] *= inv;
        StorePack<TO, N>(yr + u * N, v[i]);
      }
    }
  }
}

// Rows too long for registers: pass 1 keeps an online (max, sum) per thread
// and merges them over the block; pass 2 re-reads and writes.
template <typename T, typename TO, int N, int64_t kVocab = 0>
__global__ void __launch_bounds__(1024)
    SoftmaxStreamKernel(const T* __restrict__ x, TO* __restrict__ y, int64_t rows, int64_t vocab,
                        float scale) {
  vocab = Width<kVocab>(vocab);
  __shared__ float sm[32], ss[32];
  const int64_t units = vocab / N;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Pack<T, N>* xr = reinterpret_cast<const Pack<T, N>*>(x + r * vocab);
    float m = -INFINITY, s = 0.0f;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const Pack<T, N> p = xr[u];
      float v[N];
      float pm = -INFINITY;
      bool nan = false;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        v[j] = ToFloat(p.v[j]);
        pm = fmaxf(pm, v[j]);  // fmaxf passes NaN over
        nan |= v[j] != v[j];
      }
      if (pm == -INFINITY && !nan) continue;  // contributes nothing
      if (pm == -INFINITY) {  // NaN among -inf: the row's sum is NaN (as the reference's)
        s = NAN;
        if (m == -INFINITY) m = 0.0f;  // so that the block merge keeps it
        continue;
      }
      if (pm > m) {
        s *= __expf((m - pm) * scale);
        m = pm;
      }
#pragma unroll
      for (int j = 0; j < N; ++j) s += __expf((v[j] - m) * scale);
    }
    // Block merge: butterfly within warps, then warp 0 over the warps.
    WarpMerge(m, s, scale);
    if (lane == 0) sm[warp] = m, ss[warp] = s;
    __syncthreads();
    m = lane < (blockDim.x >> 5) ? sm[lane] : -INFINITY;
    s = lane < (blockDim.x >> 5) ? ss[lane] : 0.0f;
    WarpMerge(m, s, scale);
    __syncthreads();
    const float inv = 1.0f / s;
    TO* yr = y + r * vocab;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const Pack<T, N> p = xr[u];
      float v[N];
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = __expf((ToFloat(p.v[j]) - m) * scale) * inv;
      StorePack<TO, N>(yr + u * N, v);
    }
  }
}

// ---------------------------------------------------------------------------
// Split-row kernel: grid.x = rows * C in clusters of C blocks; block `rank`
// of a cluster owns packs [rank * chunk, (rank + 1) * chunk) of its row.
// Its packs stay in registers as they came (2 registers a pack of 16-bit
// values); each thread's (max, sum) is merged over the block, warp 0 merges
// the C blocks' partials through distributed shared memory, and the output
// exp((x - M) * scale) / S is computed from the cached packs again. Two exps
// an element, and still faster than caching the exps as floats with every
// warp merging the partials: 0.48 -> 0.60 x copy at 16 x 128256 float16 ->
// float32, 0.42 -> 0.61 at 64 x 128256 on the same launch shape (H200,
// bench/labs/softmax_floor_lab.cu, which also times the floor under any split
// softmax). Compiled for sm_90+ only (clusters and distributed shared
// memory); the launcher never launches it elsewhere.
template <typename T, typename TO, int N, int kItems, int64_t kVocab = 0, int64_t kChunk = 0>
__global__ void __launch_bounds__(kBlockBound)
    SoftmaxClusterKernel(const T* __restrict__ x, TO* __restrict__ y, int64_t vocab, int64_t chunk,
                         float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  vocab = Width<kVocab>(vocab);
  chunk = Width<kChunk>(chunk);
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int c = static_cast<int>(cluster.num_blocks());
  const int64_t row = blockIdx.x / c;
  __shared__ float2 warp_part[32];
  __shared__ float2 part;    // this block's (max, sum), read by warp 0 of every block
  __shared__ float2 row_ms;  // the row's (max, sum), from this block's warp 0
  const int64_t units = vocab / N;
  const int64_t u0 = int64_t{rank} * chunk;
  const int64_t u1 = min(units, u0 + chunk);
  const Pack<T, N>* xr = reinterpret_cast<const Pack<T, N>*>(x + row * vocab);
  Pack<T, N> v[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t u = u0 + threadIdx.x + int64_t{i} * blockDim.x;
    if (u < u1) v[i] = xr[u];
  }
  float m = -INFINITY;
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kItems; ++i)
    if (u0 + threadIdx.x + int64_t{i} * blockDim.x < u1)
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const float f = ToFloat(v[i].v[j]);
        m = fmaxf(m, f);  // fmaxf passes NaN over
        nan |= f != f;
      }
  float s = 0.0f;
  if (m == -INFINITY && nan) {
    // Only NaN and -inf here: the row's sum must still come out NaN, as the
    // reference's does (a NaN anywhere makes the whole row NaN). A finite
    // max keeps Merge from dropping this partial as empty.
    m = 0.0f;
    s = NAN;
  } else if (m != -INFINITY) {
    // A thread whose values are all -inf (or that has none) contributes
    // nothing, never (-inf) - (-inf).
#pragma unroll
    for (int i = 0; i < kItems; ++i)
      if (u0 + threadIdx.x + int64_t{i} * blockDim.x < u1)
#pragma unroll
        for (int j = 0; j < N; ++j) s += __expf((ToFloat(v[i].v[j]) - m) * scale);
  }
  // Block merge of (m, s): warps, then warp 0 over the warps.
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  WarpMerge(m, s, scale);
  if (lane == 0) warp_part[warp] = make_float2(m, s);
  __syncthreads();
  if (warp == 0) {
    m = lane < (blockDim.x >> 5) ? warp_part[lane].x : -INFINITY;
    s = lane < (blockDim.x >> 5) ? warp_part[lane].y : 0.0f;
    WarpMerge(m, s, scale);
    if (lane == 0) part = make_float2(m, s);
  }
  cluster.sync();   // every block's partial is written
  if (warp == 0) {  // lane r reads rank r's partial
    float mm = -INFINITY, ss = 0.0f;
    if (lane < static_cast<unsigned>(c)) {
      const float2 p = *cluster.map_shared_rank(&part, static_cast<int>(lane));
      mm = p.x;
      ss = p.y;
    }
    WarpMerge(mm, ss, scale);
    if (lane == 0) row_ms = make_float2(mm, ss);
  }
  // The row's (max, sum) is in row_ms, and no block leaves while another
  // still reads its `part`.
  cluster.sync();
  // A row of -inf only comes out NaN (0 / 0), as from the reference, the CPU
  // and the per-row kernels (this kernel wrote zeros before).
  const float mm = row_ms.x, inv = 1.0f / row_ms.y;
  TO* yr = y + row * vocab;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t u = u0 + threadIdx.x + int64_t{i} * blockDim.x;
    if (u < u1) {
      float o[N];
#pragma unroll
      for (int j = 0; j < N; ++j) o[j] = __expf((ToFloat(v[i].v[j]) - mm) * scale) * inv;
      StorePack<TO, N>(yr + u * N, o);
    }
  }
#else
  (void)x, (void)y, (void)vocab, (void)chunk, (void)scale;
#endif
}

// ---------------------------------------------------------------------------
// Host side.

#ifndef __CUDACC_RTC__  // the launchers: host code, which NVRTC does not compile
namespace detail {

template <int kItems>
unsigned ThreadsFor(int64_t units) {
  const int64_t t = (units + kItems - 1) / kItems;
  return static_cast<unsigned>(std::max<int64_t>(32, (t + 31) / 32 * 32));
}

template <typename T, typename TO, int N, int kItems>
cudaError_t LaunchReg(const T* x, TO* y, int64_t rows, int64_t vocab, float scale, cudaStream_t s) {
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t{1} << 30));
  SoftmaxRegKernel<T, TO, N, kItems>
      <<<grid, ThreadsFor<kItems>(vocab / N), 0, s>>>(x, y, rows, vocab, scale);
  return cudaGetLastError();
}

// Register cache size: the fewest items per thread that keep the block at
// <= 512 threads (several rows per SM, up to 128 registers a thread for the
// cache); a row longer than 512 x 32 floats streams.
template <typename T, typename TO, int N>
cudaError_t LaunchPerRow(const T* x, TO* y, int64_t rows, int64_t vocab, float scale,
                         cudaStream_t s) {
  constexpr int kMaxItems = kMaxCached / N;
  const int64_t units = vocab / N;
  for (int items = 1; items <= kMaxItems; items *= 2) {
    if ((units + items - 1) / items > kMaxThreads) continue;
    switch (items) {
      case 1:
        return LaunchReg<T, TO, N, 1>(x, y, rows, vocab, scale, s);
      case 2:
        return LaunchReg<T, TO, N, 2>(x, y, rows, vocab, scale, s);
      case 4:
        return LaunchReg<T, TO, N, (kMaxItems >= 4 ? 4 : 1)>(x, y, rows, vocab, scale, s);
      case 8:
        return LaunchReg<T, TO, N, (kMaxItems >= 8 ? 8 : 1)>(x, y, rows, vocab, scale, s);
      case 16:
        return LaunchReg<T, TO, N, (kMaxItems >= 16 ? 16 : 1)>(x, y, rows, vocab, scale, s);
      case 32:
        return LaunchReg<T, TO, N, (kMaxItems >= 32 ? 32 : 1)>(x, y, rows, vocab, scale, s);
      default:
        break;
    }
  }
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(rows, 1, int64_t{1} << 30));
  SoftmaxStreamKernel<T, TO, N><<<grid, 1024, 0, s>>>(x, y, rows, vocab, scale);
  return cudaGetLastError();
}

inline cudaLaunchConfig_t ClusterConfig(unsigned grid, unsigned threads, int c, cudaStream_t s,
                                        cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.stream = s;
  *attr = cudaLaunchAttribute{};
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(c);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether `kernel` runs as clusters of c blocks of `threads` on `device`:
// its code came from sm_90+ PTX (an older arch's code has an empty body)
// and cudaOccupancyMaxActiveClusters places at least one. Asked once per
// (kernel, device, c, threads); opts in to non-portable sizes (> 8) first.
template <typename Kernel>
bool ClustersRun(Kernel kernel, int device, int c, unsigned threads) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, unsigned>, bool> cached;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, c, threads);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cached.find(key); it != cached.end()) return it->second;
  bool ok = false;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess &&
      (current == device || cudaSetDevice(device) == cudaSuccess)) {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.ptxVersion >= 90 &&
        (c <= 8 || cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                        1) == cudaSuccess)) {
      cudaLaunchAttribute attr;
      const cudaLaunchConfig_t cfg =
          ClusterConfig(static_cast<unsigned>(c), threads, c, nullptr, &attr);
      int clusters = 0;
      ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0;
    }
    if (current != device) (void)cudaSetDevice(current);
  }
  (void)cudaGetLastError();  // a refusal is an answer, not the request's error
  cached.emplace(key, ok);
  return ok;
}

template <typename T, typename TO, int N, int kItems>
cudaError_t LaunchClusterItems(const T* x, TO* y, int64_t rows, int64_t vocab, float scale, int c,
                               int64_t chunk, unsigned threads, const DeviceCaps& dev,
                               cudaStream_t s, bool* launched) {
  auto kernel = SoftmaxClusterKernel<T, TO, N, kItems>;
  *launched = false;
  if (!ClustersRun(kernel, dev.index, c, threads)) return cudaSuccess;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      ClusterConfig(static_cast<unsigned>(rows * c), threads, c, s, &attr);
  const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, x, y, vocab, chunk, scale);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // refused: the caller takes the per-row path
    return cudaSuccess;
  }
  *launched = true;
  g_cluster_launches.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}

// Clusters of c blocks (raised to what caches a row), the fewest items per
// thread that keep a block at <= max_threads. *launched false: nothing ran.
template <typename T, typename TO, int N>
cudaError_t LaunchCluster(const T* x, TO* y, int64_t rows, int64_t vocab, float scale, Plan plan,
                          const DeviceCaps& dev, cudaStream_t s, bool* launched) {
  constexpr int kMaxItems = kMaxCached / N;
  *launched = false;
  const int64_t units = vocab / N;
  const int max_threads = std::clamp(plan.max_threads, 32, kMaxThreads);
  int c = std::max(plan.cluster, Pow2Ceil((units + int64_t{max_threads} * kMaxItems - 1) /
                                          (int64_t{max_threads} * kMaxItems)));
  if (c < 2) c = 2;
  if (c > kMaxCluster || rows * c > INT_MAX) return cudaSuccess;
  const int64_t chunk = (units + c - 1) / c;
  for (int items = 1; items <= kMaxItems; items *= 2) {
    if ((chunk + items - 1) / items > max_threads) continue;
    const unsigned threads = ThreadsFor<1>((chunk + items - 1) / items);
#define KERNELD_SOFTMAX_CLUSTER_CASE(I)                            \
  case I:                                                          \
    return LaunchClusterItems<T, TO, N, (kMaxItems >= I ? I : 1)>( \
        x, y, rows, vocab, scale, c, chunk, threads, dev, s, launched);
    switch (items) {
      KERNELD_SOFTMAX_CLUSTER_CASE(1)
      KERNELD_SOFTMAX_CLUSTER_CASE(2)
      KERNELD_SOFTMAX_CLUSTER_CASE(4)
      KERNELD_SOFTMAX_CLUSTER_CASE(8)
      KERNELD_SOFTMAX_CLUSTER_CASE(16)
      KERNELD_SOFTMAX_CLUSTER_CASE(32)
      default:
        break;
    }
#undef KERNELD_SOFTMAX_CLUSTER_CASE
  }
  return cudaSuccess;
}

template <typename T, typename TO, int N>
cudaError_t Launch(const T* x, TO* y, int64_t rows, int64_t vocab, float scale,
                   const DeviceCaps& dev, cudaStream_t s) {
  Plan plan = ChoosePlan(rows, vocab, dev);
  if (const int fc = g_force_cluster.load(std::memory_order_relaxed); fc >= 0) plan.cluster = fc;
  if (const int ft = g_force_threads.load(std::memory_order_relaxed); ft > 0) plan.max_threads = ft;
  if (plan.cluster >= 2 && dev.compute_capability >= 90) {
    bool launched = false;
    const cudaError_t e =
        LaunchCluster<T, TO, N>(x, y, rows, vocab, scale, plan, dev, s, &launched);
    if (e != cudaSuccess || launched) return e;
  }
  return LaunchPerRow<T, TO, N>(x, y, rows, vocab, scale, s);
}

}  // namespace detail

// y[r, :] = softmax(x[r, :] * scale) for r < rows, rows of `vocab` elements,
// on `stream`. scale = 1 / temperature (> 0). Any vocab, any alignment.
template <typename T, typename TO>
cudaError_t Softmax(const T* x, TO* y, int64_t rows, int64_t vocab, float scale,
                    const DeviceCaps& dev, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  // Four elements a pack for every dtype: each pack's output is one 16-byte
  // float4 store, so a warp's stores are contiguous. (Eight-element packs of
  // half types made each lane store 32 bytes: every store instruction then
  // covered twice the span with holes, and float16/bfloat16 large rows ran
  // at 0.84-0.86 x copy against float32's 0.98.) Half types read 8 bytes.
  constexpr int kN = 4;
  const bool packs = vocab % kN == 0 && reinterpret_cast<uintptr_t>(x) % (kN * sizeof(T)) == 0 &&
                     reinterpret_cast<uintptr_t>(y) % (kN * sizeof(TO)) == 0;
  if (packs) return detail::Launch<T, TO, kN>(x, y, rows, vocab, scale, dev, stream);
  return detail::Launch<T, TO, 1>(x, y, rows, vocab, scale, dev, stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::softmax
