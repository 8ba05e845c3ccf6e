// How fast can any decode softmax be, measured: the floor under the target
// "softmax at decode shapes >= 0.90 x copy" (docs/kernels.md; README.md).
//
// A softmax row must be read whole before its first output is written (every
// output needs the row's max and sum). So at shapes too small to keep the GPU
// busy with other rows, the time is at least: read the row, reduce one value
// across everything that read it, then write. This lab times exactly that
// and nothing more, on softmax's bytes (float16 in, float32 out): skeleton
// kernels that load the row into registers, reduce one float (the max) over
// the row, and write x - max, with no exp and no second reduction. Whatever
// they cost, a softmax costs at least as much. The ways to share the row's
// value, each swept over its launch shapes:
//   stream    no dependency: each thread writes what it read (a converting
//             copy; the layout's own floor)
//   block     one block a row (__syncthreads reduction)
//   clusterC  a row over a cluster of C blocks (2..16) exchanging one float
//             through distributed shared memory (cluster.sync)
//   gridP     a row over P blocks anywhere on the GPU (all resident),
//             exchanging one float through global memory (a per-row arrival
//             counter that only grows, so nothing is reset between launches)
// and the whole softmax in the same frame ("softmax cluster" / "softmax
// grid", SoftFull: raw packs in registers, one (max, sum) exchange, the exp
// computed again for the output; "plain": without streaming load and store
// hints), beside kernel_bench's reference (cudaMemcpyAsync of the same
// bytes, half read and half written) and the production softmax. Each
// skeleton is checked against the host (x - row max, exactly) and each
// softmax against a float64 softmax before it is timed. CUDA events, L2
// read-flushed before each run, median of --reps (kernel_bench's method).
// The production split-row kernel (ops/softmax/cuda.cuh) is "softmax
// cluster" since this lab measured it faster than the kernel before it at
// every split shape; its plan (ops/softmax/plan.h) comes from this sweep.
//
//   softmax_floor_lab [--reps N]
// Last, one table: shape, copy us, production x copy, the best of each
// family x copy.
#include <cooperative_groups.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench_cuda.cuh"
#include "ops/softmax/cuda.cuh"

namespace cg = cooperative_groups;

namespace {

int g_sms = 1;
kerneld::bench::L2Flush g_flush;

template <typename F>
double TimeUs(cudaStream_t s, int reps, F&& f) {
  return kerneld::bench::FlushedMedianUs(s, reps, g_flush, f);
}

constexpr unsigned kFull = 0xffffffffu;

// Max over the block of v; every thread gets it.
__device__ float BlockMax(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

enum Mode { kStream = 0, kBlock = 1, kCluster = 2, kGrid = 3, kSoftCluster = 4, kSoftGrid = 5 };

__device__ __forceinline__ void MergeMs(float& m, float& s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return;
  s = s * __expf(m - mm) + s2 * __expf(m2 - mm);
  m = mm;
}

__device__ __forceinline__ float4 Halves(uint2 p) {
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&p.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&p.y));
  return make_float4(a.x, a.y, b.x, b.y);
}

// This block's part of its row: packs [begin, end), loaded into v (K a
// thread, strided by the block; -inf halves past the end).
struct Chunk {
  int64_t row, begin, end;
  float4* yr;
};

template <int K, bool kHints>
__device__ __forceinline__ Chunk LoadChunk(const uint2* x, float4* y, int64_t units, int parts,
                                           uint2 (&v)[K]) {
  const int64_t row = blockIdx.x / parts;
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t chunk = (units + parts - 1) / parts;
  const int64_t begin = part * chunk, end = begin + chunk < units ? begin + chunk : units;
  const uint2* xr = x + row * units;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t u = begin + threadIdx.x + int64_t{k} * blockDim.x;
    v[k] = u < end ? (kHints ? __ldcs(xr + u) : xr[u]) : make_uint2(0xfc00fc00u, 0xfc00fc00u);
  }
  return {row, begin, end, y + row * units};
}

// The largest of the thread's K packs (-inf halves pad a short chunk).
template <int K>
__device__ __forceinline__ float PacksMax(const uint2 (&v)[K]) {
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const float4 f = Halves(v[k]);
    m = fmaxf(m, fmaxf(fmaxf(f.x, f.y), fmaxf(f.z, f.w)));
  }
  return m;
}

// Thread 0 of each of a row's blocks, after writing its partial: count this
// block in, then wait until every block of the launch has (the counter only
// grows: `want` is its value after this launch).
__device__ __forceinline__ void ArriveAndWait(unsigned* arrived, int64_t row, unsigned want) {
  __threadfence();
  atomicAdd(arrived + row, 1u);
  unsigned seen;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(arrived + row));
  } while (static_cast<int>(seen - want) < 0);
}

// The whole softmax (scale 1) in the skeletons' frame: the row's packs held
// raw in registers, each thread's (max, sum) against its own max, one
// exchange of (max, sum) over the row's blocks (cluster or global memory),
// exp computed again for the output (two exps an element: the cache stays
// 2 registers a pack, so a block can hold 32 packs a thread). kHints:
// streaming loads and stores (__ldcs / __stcs) or plain ones.
template <int K, int kMode, bool kHints>
__global__ void SoftFull(const uint2* __restrict__ x, float4* __restrict__ y, int64_t units,
                         int parts, float2* partials, unsigned* arrived, unsigned want) {
  __shared__ float2 red[32];
  uint2 v[K];
  const Chunk ch = LoadChunk<K, kHints>(x, y, units, parts, v);
  float m = PacksMax(v);
  float s = 0.f;
  if (m != -INFINITY) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const float4 f = Halves(v[k]);
      s += __expf(f.x - m) + __expf(f.y - m) + __expf(f.z - m) + __expf(f.w - m);
    }
  }
  for (int o = 16; o > 0; o >>= 1)
    MergeMs(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if (lane == 0) red[warp] = make_float2(m, s);
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? red[lane].x : -INFINITY;
    s = lane < warps ? red[lane].y : 0.f;
    for (int o = 16; o > 0; o >>= 1)
      MergeMs(m, s, __shfl_xor_sync(kFull, m, o), __shfl_xor_sync(kFull, s, o));
  }
  if constexpr (kMode == kSoftCluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // clusters: sm_90+; never launched below
    __shared__ float2 mine;  // this block's (max, sum), read by warp 0 of every block
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) mine = make_float2(m, s);
    cluster.sync();
    if (warp == 0) {
      float gm = -INFINITY, gs = 0.f;
      for (int r = lane; r < parts; r += 32) {
        const float2 p = *cluster.map_shared_rank(&mine, r);
        MergeMs(gm, gs, p.x, p.y);
      }
      for (int o = 16; o > 0; o >>= 1)
        MergeMs(gm, gs, __shfl_xor_sync(kFull, gm, o), __shfl_xor_sync(kFull, gs, o));
      if (lane == 0) red[0] = make_float2(gm, gs);
    }
    cluster.sync();
#endif
  } else {
    if (threadIdx.x == 0) {
      partials[blockIdx.x] = make_float2(m, s);
      ArriveAndWait(arrived, ch.row, want);
      float gm = -INFINITY, gs = 0.f;
      for (int p = 0; p < parts; ++p) {
        const float2 q = __ldcg(partials + ch.row * parts + p);
        MergeMs(gm, gs, q.x, q.y);
      }
      red[0] = make_float2(gm, gs);
    }
    __syncthreads();
  }
  const float gm = red[0].x, inv = 1.f / red[0].y;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t u = ch.begin + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < ch.end) {
      const float4 f = Halves(v[k]);
      const float4 o = make_float4(__expf(f.x - gm) * inv, __expf(f.y - gm) * inv,
                                   __expf(f.z - gm) * inv, __expf(f.w - gm) * inv);
      if (kHints)
        __stcs(ch.yr + u, o);
      else
        ch.yr[u] = o;
    }
  }
}

// Rows of `units` 4-element packs (8 bytes in, 16 out), `parts` blocks a row,
// each with a contiguous chunk; K packs a thread, held in registers.
template <int K, int kMode>
__global__ void Skeleton(const uint2* __restrict__ x, float4* __restrict__ y, int64_t units,
                         int parts, float* partials, unsigned* arrived, unsigned want) {
  __shared__ float red[32];
  uint2 v[K];
  const Chunk ch = LoadChunk<K, true>(x, y, units, parts, v);
  float m = 0.f;
  if constexpr (kMode != kStream) m = BlockMax(PacksMax(v), red);
  if constexpr (kMode == kCluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // clusters: sm_90+; never launched below
    __shared__ float mine;  // this block's max, read by warp 0 of every block
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) mine = m;
    cluster.sync();
    if (threadIdx.x < 32) {
      float g = -INFINITY;
      for (int r = static_cast<int>(threadIdx.x); r < parts; r += 32)
        g = fmaxf(g, *cluster.map_shared_rank(&mine, r));
      for (int o = 16; o > 0; o >>= 1) g = fmaxf(g, __shfl_xor_sync(kFull, g, o));
      if (threadIdx.x == 0) red[0] = g;
    }
    cluster.sync();  // no block leaves while another reads its shared memory
    m = red[0];
#endif
  } else if constexpr (kMode == kGrid) {
    __syncthreads();  // BlockMax's readers of red[] are done
    if (threadIdx.x == 0) {
      partials[blockIdx.x] = m;
      ArriveAndWait(arrived, ch.row, want);
      float g = -INFINITY;
      for (int p = 0; p < parts; ++p) g = fmaxf(g, __ldcg(partials + ch.row * parts + p));
      red[0] = g;
    }
    __syncthreads();
    m = red[0];
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t u = ch.begin + threadIdx.x + int64_t{k} * blockDim.x;
    if (u < ch.end) {
      const float4 f = Halves(v[k]);
      __stcs(ch.yr + u, make_float4(f.x - m, f.y - m, f.z - m, f.w - m));
    }
  }
}

struct Shape {
  int64_t rows, vocab;
};

struct Buffers {
  __half* x = nullptr;
  float* y = nullptr;
  float2* partials = nullptr;
  unsigned* arrived = nullptr;
  unsigned arrivals = 0;  // what each row's counter reaches after the last grid launch
  std::vector<__half> hx;
  std::vector<float> want;   // row max
  std::vector<double> soft;  // float64 softmax of every element
};

template <int kMode>
auto Partials(Buffers& b) {
  if constexpr (kMode >= kSoftCluster)
    return b.partials;
  else
    return reinterpret_cast<float*>(b.partials);
}

template <int K, int kMode, bool kHints>
auto KernelFor() {
  if constexpr (kMode >= kSoftCluster)
    return SoftFull<K, kMode, kHints>;
  else
    return Skeleton<K, kMode>;
}

template <int K, int kMode, bool kHints = true>
bool LaunchK(const Shape& sh, Buffers& b, int parts, int threads, cudaStream_t s) {
  auto kernel = KernelFor<K, kMode, kHints>();
  const int64_t units = sh.vocab / 4;
  const unsigned grid = static_cast<unsigned>(sh.rows * parts);
  if constexpr (kMode == kCluster || kMode == kSoftCluster) {
    if (parts > 8 && cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                          1) != cudaSuccess)
      return false;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(static_cast<unsigned>(threads));
    cfg.stream = s;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(parts);
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    cfg.gridDim = dim3(static_cast<unsigned>(parts));
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || clusters < 1) {
      (void)cudaGetLastError();
      return false;
    }
    cfg.gridDim = dim3(grid);
    const cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, reinterpret_cast<const uint2*>(b.x),
                                             reinterpret_cast<float4*>(b.y), units, parts,
                                             Partials<kMode>(b), b.arrived, 0u);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  } else {
    if constexpr (kMode == kGrid || kMode == kSoftGrid) {  // all resident, or the spin never ends
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
      if (int64_t{per_sm} * g_sms < static_cast<int64_t>(grid)) return false;
    }
    if constexpr (kMode == kGrid || kMode == kSoftGrid) b.arrivals += static_cast<unsigned>(parts);
    kernel<<<grid, threads, 0, s>>>(reinterpret_cast<const uint2*>(b.x),
                                    reinterpret_cast<float4*>(b.y), units, parts,
                                    Partials<kMode>(b), b.arrived, b.arrivals);
    return cudaGetLastError() == cudaSuccess;
  }
}

// LaunchK for the thread's pack count k: one instantiation per K the sweep
// uses (1 to 32, powers of 2); any other k launches nothing.
template <int kMode, bool kHints = true>
bool Launch(const Shape& sh, Buffers& b, int parts, int threads, int k, cudaStream_t s) {
  bool ok = false;
  [&]<int... Ks>(std::integer_sequence<int, Ks...>) {
    ((k == Ks && (ok = LaunchK<Ks, kMode, kHints>(sh, b, parts, threads, s), true)) || ...);
  }
  (std::integer_sequence<int, 1, 2, 4, 8, 16, 32>{});
  return ok;
}

// Modes 6 and 7: kSoftCluster and kSoftGrid with plain loads and stores.
constexpr int kModes = 8;
bool Run(int mode, const Shape& sh, Buffers& b, int parts, int threads, int k, cudaStream_t s) {
  bool ok = false;
  [&]<int... Ms>(std::integer_sequence<int, Ms...>) {
    ((mode == Ms &&
      (ok = Launch<(Ms < 6 ? Ms : Ms - 2), (Ms < 6)>(sh, b, parts, threads, k, s), true)) ||
     ...);
  }
  (std::make_integer_sequence<int, kModes>{});
  return ok;
}

// y == x (stream) or x - row max, exactly (float arithmetic on float16 values).
bool Check(int mode, const Shape& sh, Buffers& b) {
  std::vector<float> got(static_cast<size_t>(sh.rows * sh.vocab));
  CK(cudaMemcpy(got.data(), b.y, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
  if (mode >= kSoftCluster) {
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - b.soft[i]) <= 1e-6 + 2e-4 * b.soft[i])) return false;
    return true;
  }
  for (int64_t r = 0; r < sh.rows; ++r) {
    const float m = mode == kStream ? 0.f : b.want[static_cast<size_t>(r)];
    for (int64_t i = 0; i < sh.vocab; ++i) {
      const size_t at = static_cast<size_t>(r * sh.vocab + i);
      if (got[at] != __half2float(b.hx[at]) - m) return false;
    }
  }
  return true;
}

const char* kFamily[kModes] = {"stream",
                               "block",
                               "cluster",
                               "grid",
                               "softmax cluster",
                               "softmax grid",
                               "softmax cluster plain",
                               "softmax grid plain"};

}  // namespace

int main(int argc, char** argv) {
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: softmax_floor_lab [--reps N]\n");
      return 2;
    }
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  std::printf(
      "softmax_floor_lab: %s, %d SMs, L2 %d MiB; CUDA events, L2 read-flushed, median of %d\n",
      prop.name, g_sms, prop.l2CacheSize >> 20, reps);
  g_flush.bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  g_flush.sms = g_sms;
  void* fb = nullptr;
  CK(cudaMalloc(&fb, g_flush.bytes));
  CK(cudaMemset(fb, 1, g_flush.bytes));
  g_flush.buf = fb;
  CK(cudaMalloc(&g_flush.sink, sizeof(unsigned)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const kerneld::cuda::softmax::DeviceCaps dev{0, prop.major * 10 + prop.minor, g_sms};

  const std::vector<Shape> shapes = {{16, 4096},  {1, 32768},   {16, 32768},
                                     {64, 32768}, {64, 50000},  {1, 128256},
                                     {4, 128256}, {16, 128256}, {64, 128256}};
  std::vector<std::string> table;
  for (const Shape& sh : shapes) {
    const size_t n = static_cast<size_t>(sh.rows * sh.vocab);
    Buffers b;
    b.hx.resize(n);
    b.want.assign(static_cast<size_t>(sh.rows), -INFINITY);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; ++i) {
      h = (h ^ static_cast<uint32_t>(i)) * 16777619u;
      b.hx[i] = __float2half(static_cast<float>(h % 20001) / 1000.f - 10.f);
      float& w = b.want[i / static_cast<size_t>(sh.vocab)];
      w = std::max(w, __half2float(b.hx[i]));
    }
    b.soft.resize(n);
    for (int64_t r = 0; r < sh.rows; ++r) {
      double sum = 0;
      const size_t r0 = static_cast<size_t>(r * sh.vocab);
      for (int64_t i = 0; i < sh.vocab; ++i)
        sum += std::exp(static_cast<double>(__half2float(b.hx[r0 + i])) - b.want[r]);
      for (int64_t i = 0; i < sh.vocab; ++i)
        b.soft[r0 + i] =
            std::exp(static_cast<double>(__half2float(b.hx[r0 + i])) - b.want[r]) / sum;
    }
    CK(cudaMalloc(&b.x, n * sizeof(__half)));
    CK(cudaMalloc(&b.y, n * sizeof(float)));
    CK(cudaMalloc(&b.partials, static_cast<size_t>(sh.rows) * 1024 * sizeof(float2)));
    CK(cudaMalloc(&b.arrived, static_cast<size_t>(sh.rows) * sizeof(unsigned)));
    CK(cudaMemset(b.arrived, 0, static_cast<size_t>(sh.rows) * sizeof(unsigned)));
    CK(cudaMemcpy(b.x, b.hx.data(), n * sizeof(__half), cudaMemcpyHostToDevice));
    const size_t bytes = n * (sizeof(__half) + sizeof(float));
    void *ca, *cbuf;
    CK(cudaMalloc(&ca, bytes / 2));
    CK(cudaMalloc(&cbuf, bytes / 2));
    const double copy = TimeUs(
        s, reps, [&] { CK(cudaMemcpyAsync(cbuf, ca, bytes / 2, cudaMemcpyDeviceToDevice, s)); });
    CK(cudaFree(ca));
    CK(cudaFree(cbuf));
    const double prod = TimeUs(s, reps, [&] {
      CK((kerneld::cuda::softmax::Softmax<__half, float>(b.x, b.y, sh.rows, sh.vocab, 1.0f, dev,
                                                         s)));
    });
    std::printf("%4lld x %-7lld copy %7.2f us   production %7.2f us (%.2f x copy)\n",
                static_cast<long long>(sh.rows), static_cast<long long>(sh.vocab), copy, prod,
                copy / prod);
    double best[kModes] = {};
    std::string best_name[kModes];
    const int64_t units = sh.vocab / 4;
    for (int mode = kStream; mode < kModes; ++mode) {
      const bool cluster = mode == kCluster || mode == kSoftCluster || mode == 6;
      std::vector<int> parts_list;
      if (mode == kBlock) parts_list = {1};
      if (cluster) parts_list = {2, 4, 8, 16};
      if (mode == kStream || (mode != kBlock && !cluster))
        for (int p = 1; p <= 512; p *= 2)
          if (sh.rows * p <= 8 * g_sms && (mode == kStream || p >= 2)) parts_list.push_back(p);
      for (int parts : parts_list) {
        const int64_t chunk = (units + parts - 1) / parts;
        for (int threads : {128, 256, 512, 1024}) {
          int k = 1;
          while (k < 32 && int64_t{k} * threads < chunk) k *= 2;
          if (int64_t{k} * threads < chunk) continue;                // the row does not fit
          if (k > 1 && int64_t{k / 2} * threads >= chunk) continue;  // fewer threads do it
          CK(cudaMemset(b.y, 0xff, n * sizeof(float)));
          if (!Run(mode, sh, b, parts, threads, k, s)) continue;
          CK(cudaStreamSynchronize(s));
          char name[64];
          std::snprintf(name, sizeof name, "%s p%d t%d k%d", kFamily[mode], parts, threads, k);
          if (!Check(mode, sh, b)) {
            std::printf("    %-26s WRONG\n", name);
            continue;
          }
          const double us = TimeUs(s, reps, [&] { Run(mode, sh, b, parts, threads, k, s); });
          std::printf("    %-26s %7.2f us  %.2f x copy\n", name, us, copy / us);
          if (best[mode] == 0 || us < best[mode]) {
            best[mode] = us;
            best_name[mode] = name;
          }
        }
      }
    }
    char line[800];
    int at = std::snprintf(line, sizeof line, "| %lld x %lld | %.2f | %.2f |",
                           static_cast<long long>(sh.rows), static_cast<long long>(sh.vocab), copy,
                           copy / prod);
    for (int mode = kStream; mode < kModes; ++mode)
      at += std::snprintf(line + at, sizeof line - static_cast<size_t>(at),
                          best[mode] > 0 ? " %.2f (%s) |" : " – |", copy / best[mode],
                          best_name[mode].c_str());
    table.push_back(line);
    CK(cudaFree(b.x));
    CK(cudaFree(b.y));
    CK(cudaFree(b.partials));
    CK(cudaFree(b.arrived));
  }
  std::printf(
      "\n| rows x vocab | copy us | production x copy | stream (no dependency) | block | cluster | "
      "grid | softmax, cluster | softmax, grid | softmax, cluster, plain ld/st | softmax, grid, "
      "plain ld/st |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& l : table) std::printf("%s\n", l.c_str());
  return 0;
}
