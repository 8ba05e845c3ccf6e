// gemm, the FMA decode kernel (M <= 32 in kerneld's use, any M here):
// c = alpha * a @ b in exact float32 FMAs, for float32, float16 and
// bfloat16 on any compute capability. The tensor-core kernels for half types
// on compute capability >= 8.0 are gemm_decode_pipe.cuh and
// gemm_decode_mma.cuh; the binding (cuda.cu) chooses among the three
// (ChooseDecodeKernel).
//
// With few rows in a, c = a @ b is a stream over b: every element of b is
// read once and used M times, so the kernel is built to keep DRAM busy:
//  - a block owns a tile of 128 columns of c (b [K, N]: a lane owns 4
//    adjacent columns, one 8- or 16-byte load per k row) or 64 (b [N, K]:
//    a lane owns 2 rows of b, one 16-byte load per row and step along k),
//    and a slab of K; its 8 warps split the slab, each streaming its part
//    with kStages loads per lane in flight (a rolling register window,
//    started before the a slab is staged so that its latency overlaps).
//  - all lanes of a warp work on the same k at the same time, so their
//    reads of a, kept in shared memory as float32 for the whole slab, are
//    broadcasts: the FMAs, not shared memory, bound the inner loop.
//  - M is covered by tiles of up to 16 rows (grid.x, next to the column
//    tiles, so the tiles that read the same b run together and share L2).
//  - when the column tiles alone cannot fill the GPU, K is split over
//    blocks (grid.y); each split writes float32 partial sums and a second
//    kernel (ReduceSplits, gemm_decode_splits.cuh) adds them in split
//    order, scales by alpha and rounds once.
// Every sum has a fixed order (lane over its k, warps 0..7, splits 0..S-1),
// so results are deterministic. Unaligned b or N % 4 != 0 (K % 8 for
// [N, K]) selects the scalar-load variant of the same kernel.
//
// Framework-agnostic: raw pointers, templated on the element type,
// launchers return cudaError_t. Per-device kernel setup (the shared-memory
// opt-in and the occupancy query) and the split-K workspace are the
// caller's: PlanGemmDecodeFma asks `prepare` for the first, and says how
// large the second must be.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>

#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"
#include "ops/gemm/gemm_decode_splits.cuh"

namespace kerneld::cuda::decode_fma {

using decode_gemm::kThreads;
using decode_gemm::kWarps;
inline constexpr int kSmemBytes = 64 * 1024;  // the a slab (and the epilogue)
inline constexpr int kStages = 4;             // b loads in flight per lane

template <bool kTransB>
constexpr int kTileN = kTransB ? 64 : 128;
// k covered by one step of a lane: 4 rows of b [K, N]; one 16-byte run of a
// row of b [N, K].
template <typename T, bool kTransB>
constexpr int kStepK = kTransB ? 16 / static_cast<int>(sizeof(T)) : 4;
// Values per lane per step: 4 rows x 4 columns, or 2 rows x kStepK.
template <typename T, bool kTransB>
constexpr int kLoadN = kTransB ? kStepK<T, kTransB> : 4;
template <bool kTransB>
constexpr int kLoads = kTransB ? 2 : 4;
template <bool kTransB>
constexpr int kAccN = kTransB ? 2 : 4;  // outputs per lane per row of a

template <typename T, int N>
struct alignas(sizeof(T) * N) GPack {
  T v[N];
};

template <typename T, bool kTransB>
struct Stage {
  GPack<T, kLoadN<T, kTransB>> p[kLoads<kTransB>];
};

// One pack of b from p, or zeros where it falls outside: past the other
// dimension's edge (!line_in) or, element by element, from index `first` on
// at `end` (a whole pack at a time where kVec: then end is a multiple of it).
template <bool kVec, typename T, int L>
__device__ __forceinline__ void LoadPackOrZeros(const T* p, bool line_in, int64_t first,
                                                int64_t end, GPack<T, L>* out) {
  if constexpr (kVec) {
    if (line_in && first < end) {
      *out = *reinterpret_cast<const GPack<T, L>*>(p);
    } else {
#pragma unroll
      for (int e = 0; e < L; ++e) out->v[e] = FromFloat<T>(0.0f);
    }
  } else {
#pragma unroll
    for (int e = 0; e < L; ++e)
      out->v[e] = (line_in && first + e < end) ? p[e] : FromFloat<T>(0.0f);
  }
}

// Loads one step of b for this lane; zeros past the warp's k range or the
// matrix edge (so the FMAs that follow add exact zeros).
template <typename T, bool kTransB, bool kVec>
__device__ __forceinline__ Stage<T, kTransB> LoadStage(const T* __restrict__ b, int64_t n_total,
                                                       int64_t k_total, int64_t k, int64_t k_end,
                                                       int64_t n_lane) {
  Stage<T, kTransB> s;
#pragma unroll
  for (int r = 0; r < kLoads<kTransB>; ++r) {
    if constexpr (!kTransB) {
      // Row k + r, columns n_lane .. n_lane + 3.
      const int64_t kr = k + r;
      const T* p = b + kr * n_total + n_lane;
      LoadPackOrZeros<kVec>(p, kr < k_end, n_lane, n_total, &s.p[r]);
    } else {
      // Row n_lane + 32 r of b, k .. k + L - 1.
      const int64_t n = n_lane + 32 * r;
      const T* p = b + n * k_total + k;
      LoadPackOrZeros<kVec>(p, n < n_total, k, k_end, &s.p[r]);
    }
  }
  return s;
}

// acc[m][j] += a[m][kk ..] . b-step; a_s rows are `slab` floats apart.
template <typename T, int MT, bool kTransB>
__device__ __forceinline__ void ComputeStage(const Stage<T, kTransB>& s, const float* a_s, int slab,
                                             int kk, float (&acc)[MT][kAccN<kTransB>]) {
  constexpr int L = kLoadN<T, kTransB>;
  float bf[kLoads<kTransB>][L];
#pragma unroll
  for (int r = 0; r < kLoads<kTransB>; ++r)
#pragma unroll
    for (int e = 0; e < L; ++e) bf[r][e] = ToFloat(s.p[r].v[e]);
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if constexpr (!kTransB) {
      // 4 k rows x 4 columns: a[m][kk .. kk+3] is one broadcast float4.
      const float4 a4 = *reinterpret_cast<const float4*>(a_s + m * slab + kk);
      const float av[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[m][j] = fmaf(av[r], bf[r][j], acc[m][j]);
    } else {
      // 2 rows of b x L values of k.
      float av[L];
#pragma unroll
      for (int e = 0; e < L; e += 4) {
        const float4 a4 = *reinterpret_cast<const float4*>(a_s + m * slab + kk + e);
        av[e] = a4.x, av[e + 1] = a4.y, av[e + 2] = a4.z, av[e + 3] = a4.w;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int e = 0; e < L; ++e) acc[m][r] = fmaf(av[e], bf[r][e], acc[m][r]);
    }
  }
}

// Two blocks per SM where the accumulators allow it; 8 and 16 rows of a need
// more than 128 registers per thread, and spilling them would cost more
// than the second block gains.
template <typename T, int MT, bool kTransB, bool kVec>
__global__ void __launch_bounds__(kThreads, MT >= 8 ? 1 : 2)
    DecodeGemmKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                     float* __restrict__ partial, int m_total, int64_t n_total, int64_t k_total,
                     int slab, int warp_k, int m_tiles, float alpha) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  constexpr int TN = kTileN<kTransB>;
  constexpr int SK = kStepK<T, kTransB>;
  constexpr int A = kAccN<kTransB>;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int m0 = static_cast<int>(blockIdx.x % m_tiles) * MT;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x / m_tiles) * TN;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * slab;
  const int slab_len = static_cast<int>(k_total - k0 < slab ? k_total - k0 : slab);

  // This warp's part of the slab, streamed with kStages steps in flight.
  // The first window is requested before the a slab is staged, so the two
  // latencies overlap.
  const int wk0 = warp * warp_k;
  const int wk1 = wk0 + warp_k < slab_len ? wk0 + warp_k : slab_len;
  const int steps = wk1 > wk0 ? (wk1 - wk0 + SK - 1) / SK : 0;
  const int64_t n_lane = kTransB ? n0 + lane : n0 + 4 * lane;
  auto load = [&](int step) {
    // Past the last step: an out-of-range k loads nothing.
    const int64_t k = k0 + wk0 + static_cast<int64_t>(step) * SK;
    return LoadStage<T, kTransB, kVec>(b, n_total, k_total, step < steps ? k : k_total, k0 + wk1,
                                       n_lane);
  };
  Stage<T, kTransB> window[kStages];
#pragma unroll
  for (int d = 0; d < kStages; ++d) window[d] = load(d);

  // The block's slab of a, as float32, zero past M and past K: a warp per
  // row, coalesced.
  for (int m = warp; m < MT; m += kWarps) {
    const T* src = a + (m0 + m) * k_total + k0;
    const bool row_ok = m0 + m < m_total;
    for (int kk = lane; kk < slab; kk += 32)
      smem[m * slab + kk] = row_ok && kk < slab_len ? ToFloat(src[kk]) : 0.0f;
  }
  __syncthreads();

  float acc[MT][A];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < A; ++j) acc[m][j] = 0.0f;
  for (int s0 = 0; s0 < steps; s0 += kStages) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) {
      if (s0 + d < steps) {
        const Stage<T, kTransB> cur = window[d];
        window[d] = load(s0 + d + kStages);
        ComputeStage<T, MT, kTransB>(cur, smem, slab, wk0 + (s0 + d) * SK, acc);
      }
    }
  }

  // Across warps, in warp order, in shared memory (the a slab is done).
  __syncthreads();
  float* red = smem;  // [MT][TN]
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < A; ++j) {
          const int col = kTransB ? lane + 32 * j : 4 * lane + j;
          red[m * TN + col] = w == 0 ? acc[m][j] : red[m * TN + col] + acc[m][j];
        }
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < MT * TN; i += kThreads) {
    const int m = i / TN, col = i - m * TN;
    const int64_t n = n0 + col;
    if (m0 + m >= m_total || n >= n_total) continue;
    const int64_t at = (m0 + m) * n_total + n;
    if (partial == nullptr)
      c[at] = FromFloat<T>(alpha * red[i]);
    else
      partial[static_cast<int64_t>(blockIdx.y) * m_total * n_total + at] = red[i];
  }
}

// Which instantiation of the kernel runs: rows of a per block, the layout
// of b, vector loads of b.
template <int MT, bool kTransB, bool kVec>
struct Variant {
  static constexpr int kMT = MT;
  static constexpr bool kTrans = kTransB;
  static constexpr bool kVecLoads = kVec;
};

template <bool kTransB, bool kVec, typename F>
cudaError_t VisitM(int m, F&& f) {
  if (m <= 1) return f(Variant<1, kTransB, kVec>{});
  if (m <= 2) return f(Variant<2, kTransB, kVec>{});
  if (m <= 4) return f(Variant<4, kTransB, kVec>{});
  if (m <= 8) return f(Variant<8, kTransB, kVec>{});
  return f(Variant<16, kTransB, kVec>{});
}

template <typename F>
cudaError_t VisitVariant(int m, bool trans_b, bool vec, F&& f) {
  if (!trans_b) return vec ? VisitM<false, true>(m, f) : VisitM<false, false>(m, f);
  return vec ? VisitM<true, true>(m, f) : VisitM<true, false>(m, f);
}

// One launch of the kernel, from PlanGemmDecodeFma.
struct Plan {
  int m = 0;
  int64_t n = 0, k = 0;
  bool trans_b = false;
  bool vec = false;  // 16-byte (8-byte for [K, N] half types) loads of b
  int m_tiles = 1;
  int64_t tiles = 0;  // grid.x
  decode_gemm::SplitPlan split;
  size_t smem = 0;             // dynamic shared memory per block
  size_t workspace_bytes = 0;  // float32 partials; 0 for one split
};

// Plans c [m, n] = alpha * a [m, k] @ b (b [k, n], or [n, k] when trans_b)
// for a device with sm_count SMs. `prepare(kernel, want_smem, &blocks_per_sm,
// &smem_bytes)` is the caller's per-device kernel setup: it opts `kernel`
// in to want_smem bytes of dynamic shared memory (or the device's limit,
// which it returns in smem_bytes), returns the kernel's resident blocks per
// SM with that much, and returns cudaSuccess or an error, which is passed
// through. b picks the variant (vector loads where its alignment allows),
// so GemmDecodeFma must be given the same b. Refusals: cudaErrorInvalidValue
// for m, n or k < 1 (the caller handles empty shapes; k = 0 is c = 0) and
// for a shape too large for the grid (more than 65535 splits of K or
// INT_MAX column tiles).
template <typename T, typename Prepare>
cudaError_t PlanGemmDecodeFma(const T* b, int m, int64_t n, int64_t k, bool trans_b, int sm_count,
                              Prepare&& prepare, Plan* plan) {
  if (m < 1 || n < 1 || k < 1) return cudaErrorInvalidValue;
  // [K, N]: 4 adjacent columns per load, so rows of b must keep 4-element
  // alignment. [N, K]: one 16-byte run of a row of b per load.
  const bool vec = trans_b ? k % kStepK<T, true> == 0 && IsAligned16(b)
                           : n % 4 == 0 && reinterpret_cast<uintptr_t>(b) % (4 * sizeof(T)) == 0;
  return VisitVariant(m, trans_b, vec, [&](auto v) -> cudaError_t {
    using V = decltype(v);
    constexpr int MT = V::kMT;
    constexpr int TN = kTileN<V::kTrans>;
    constexpr int SK = kStepK<T, V::kTrans>;
    int bps = 0;
    int smem_limit = 0;
    if (const cudaError_t e = prepare(DecodeGemmKernel<T, MT, V::kTrans, V::kVecLoads>, kSmemBytes,
                                      &bps, &smem_limit);
        e != cudaSuccess)
      return e;
    Plan p;
    p.m = m, p.n = n, p.k = k, p.trans_b = trans_b, p.vec = vec;
    p.m_tiles = MT == 16 ? (m + 15) / 16 : 1;
    p.tiles = (n + TN - 1) / TN * p.m_tiles;
    const int64_t unit = int64_t{kWarps} * SK;
    const int64_t max_slab = std::max<int64_t>(unit, (smem_limit / 4 / MT) / unit * unit);
    p.split = decode_gemm::PlanSplits(sm_count, k, p.tiles, SK, max_slab, bps);
    if (p.split.splits > 65535 || p.tiles > INT_MAX) return cudaErrorInvalidValue;
    p.smem = static_cast<size_t>(MT) * static_cast<size_t>(std::max<int64_t>(p.split.slab, TN)) *
             sizeof(float);
    p.workspace_bytes = decode_gemm::SplitWorkspaceBytes(p.split.splits, m, n);
    *plan = p;
    return cudaSuccess;
  });
}

// Launches the plan on `stream`: with one split the kernel writes c; with
// more it writes the float32 partial sums [splits, m, n] to `workspace`
// (at least plan.workspace_bytes, 4-byte aligned), and the caller then runs
// decode_gemm::ReduceSplits(workspace, c, m * n, splits, alpha, ...).
// Refusal: cudaErrorInvalidValue for a workspace smaller than the plan's, or
// a b that no longer allows the plan's vector loads.
template <typename T>
cudaError_t GemmDecodeFma(const Plan& p, const T* a, const T* b, T* c, float alpha,
                          float* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (p.split.splits > 1 && (workspace == nullptr || workspace_bytes < p.workspace_bytes))
    return cudaErrorInvalidValue;
  if (p.vec && reinterpret_cast<uintptr_t>(b) % (p.trans_b ? 16 : 4 * sizeof(T)) != 0)
    return cudaErrorInvalidValue;
  float* partial = p.split.splits > 1 ? workspace : nullptr;
  return VisitVariant(p.m, p.trans_b, p.vec, [&](auto v) {
    using V = decltype(v);
    const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.split.splits));
    DecodeGemmKernel<T, V::kMT, V::kTrans, V::kVecLoads><<<grid, kThreads, p.smem, stream>>>(
        a, b, c, partial, p.m, p.n, p.k, static_cast<int>(p.split.slab),
        static_cast<int>(p.split.warp_k), p.m_tiles, alpha);
    return cudaGetLastError();
  });
}

}  // namespace kerneld::cuda::decode_fma
