// gemm decode kernel on tensor cores: float16 / bfloat16, M <= 32, compute
// capability >= 8.0 (mma.sync.m16n8k16, float32 accumulation).
//
// Since the pipelined kernel (gemm_decode_pipe.cuh) this one runs only
// where that cannot: a or b not 16-byte aligned, K % 8 != 0, N % 8 != 0 with
// b [K, N], or no tile configuration fitting the shared memory.
//
// The FMA kernel (cuda.cuh) spends as long on its M * N * K float32
// FMAs as on reading b; here the products go to the tensor cores and the
// kernel is left with the stream over b. Block structure as there: a tile
// of N per block, 8 warps splitting the block's slab of K, kStages b loads
// per lane in flight, a in shared memory for the whole slab, split-K
// partials summed by a second kernel. a is kept as raw 16-bit values and
// handed to mma as its A operand (rows past M are zeros, so M <= 16 is one
// m16 tile and M <= 32 two, both fed by the same b registers).
//
// The fragments come straight from 16-byte global loads, no staging of b:
//  - b [N, K] (transpose_b): lane (g = lane / 4, t = lane % 4) loads
//    b[n0 + 8 j + g][k + 8 t .. + 8] for j = 0..3. mma sums over k in any
//    order, so the k of the instruction's fragment slot 2t, 2t+1 (resp.
//    2t+8, 2t+9) is mapped to k + 8t + {0,1} (resp. {2,3}) for one mma and
//    {4,5} / {6,7} for a second: the same permutation on A, whose rows g and
//    g + 8 are read from shared memory as 16-byte runs at k + 8t. 32 k x 32
//    columns per warp step.
//  - b [K, N]: lane (g, t) loads rows k + 2t, k + 2t + 1, k + 8 + 2t,
//    k + 9 + 2t at columns n0 + 8 g .. + 8, and pairs the 16-bit values of
//    two rows (byte permutes) into B fragments: mma j (j = 0..7) takes
//    column n0 + 8 g + j as its column g. 16 k x 64 columns per warp step.
//
// Framework-agnostic: raw pointers, templated on the element type
// (__half or __nv_bfloat16), launchers return cudaError_t. Per-device
// kernel setup and the split-K workspace are the caller's, as for the FMA
// kernel (cuda.cuh); the binding is gemm_decode_mma.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/cuda/launch.cuh"
#include "common/cuda/mma.cuh"
#include "common/cuda/vec.cuh"
#include "ops/gemm/gemm_decode_splits.cuh"

namespace kerneld::cuda::decode_mma {

using decode_gemm::kThreads;
using decode_gemm::kWarps;
// Dynamic shared memory asked for (clamped to the device's limit: 227 KiB
// on sm_90, 163 KiB on sm_80, 99 KiB on sm_86/89): a 16-row slab of up to
// 6144 k, so that K = 4096 needs no split. Measured on the H100 at 16 x
// 4096 x 4096: two splits (a second kernel sums them) took 22.8 + 3.6 us of
// GPU time and 34 us a call.
inline constexpr int kMmaSmemBytes = 200 * 1024;

inline constexpr int kStages = 4;  // b loads per lane in flight (x 4 x 16 bytes)

template <bool kTransB>
constexpr int kTileN = kTransB ? 32 : 64;
template <bool kTransB>
constexpr int kStepK = kTransB ? 32 : 16;
// Shared-memory row padding of a (elements), for conflict-free fragment
// reads: 16-byte reads of rows g, g + 1 land in different bank halves
// ([N, K]); 4-byte reads of 8 rows at 4 offsets cover all 32 banks ([K, N]).
template <bool kTransB>
constexpr int kPad = kTransB ? 32 : 8;

// d += a b for one m16n8k16 tile (common/cuda/mma.cuh), the A fragment
// given as the four registers this kernel assembles it in.
template <typename T>
__device__ __forceinline__ void Mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
  const uint32_t a[4] = {a0, a1, a2, a3};
  mma::Mma<T>(d, a, b0, b1);
}

// 16 bytes global -> shared without a register (cp.async, compute
// capability >= 8.0, both addresses 16-byte aligned), and the wait for all
// of this thread's copies.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void CpAsyncWaitAll() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Eight 16-bit values of b: one 16-byte load (kVec), or element by element
// with bounds (any alignment); zeros where `ok` fails.
template <bool kVec>
__device__ __forceinline__ uint4 Load8(const uint16_t* p, bool all_ok, int valid) {
  if constexpr (kVec) {
    return all_ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
  } else {
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (e < valid) w[e / 2] |= static_cast<uint32_t>(p[e]) << (16 * (e % 2));
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

struct Stage {
  uint4 r[4];
};

// One warp step of b for this lane. `k` is the step's first k (k_total past
// the last step: loads nothing); `k_end` the warp's end.
template <bool kTransB, bool kVec>
__device__ __forceinline__ Stage LoadStage(const uint16_t* b, int64_t n_total, int64_t k_total,
                                           int64_t k, int64_t k_end, int64_t n0, int g, int t) {
  Stage s;
  if constexpr (kTransB) {
    const int64_t kk = k + 8 * t;
    const int64_t left = k_end - kk;  // valid k in this run
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + 8 * j + g;
      const bool row_ok = n < n_total && left > 0;
      const int valid = row_ok ? static_cast<int>(left < 8 ? left : 8) : 0;
      s.r[j] = Load8<kVec>(b + n * k_total + kk, row_ok && left >= 8, valid);
    }
  } else {
    const int64_t n = n0 + 8 * g;
    const int64_t cols = n_total - n;  // valid columns in this run
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t kr = k + 2 * t + (j & 1) + 8 * (j >> 1);  // rows 2t, 2t+1, 8+2t, 9+2t
      const bool row_ok = kr < k_end && cols > 0;
      const int valid = row_ok ? static_cast<int>(cols < 8 ? cols : 8) : 0;
      s.r[j] = Load8<kVec>(b + kr * n_total + n, row_ok && cols >= 8, valid);
    }
  }
  return s;
}

__device__ __forceinline__ uint32_t Word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// acc[mt][j] += a-tile mt x B fragments of this step; a_s rows are `stride`
// 16-bit values apart, kk is the step's first k within the slab.
template <typename T, int MT16, bool kTransB>
__device__ __forceinline__ void ComputeStage(const Stage& s, const uint16_t* a_s, int stride,
                                             int kk, int g, int t,
                                             float (&acc)[MT16][kTransB ? 4 : 8][4]) {
#pragma unroll
  for (int mt = 0; mt < MT16; ++mt) {
    const uint16_t* lo = a_s + (mt * 16 + g) * stride;
    const uint16_t* hi = lo + 8 * stride;
    if constexpr (kTransB) {
      const uint4 al = *reinterpret_cast<const uint4*>(lo + kk + 8 * t);
      const uint4 ah = *reinterpret_cast<const uint4*>(hi + kk + 8 * t);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        Mma<T>(acc[mt][j], al.x, ah.x, al.y, ah.y, s.r[j].x, s.r[j].y);
        Mma<T>(acc[mt][j], al.z, ah.z, al.w, ah.w, s.r[j].z, s.r[j].w);
      }
    } else {
      const uint32_t a0 = *reinterpret_cast<const uint32_t*>(lo + kk + 2 * t);
      const uint32_t a1 = *reinterpret_cast<const uint32_t*>(hi + kk + 2 * t);
      const uint32_t a2 = *reinterpret_cast<const uint32_t*>(lo + kk + 8 + 2 * t);
      const uint32_t a3 = *reinterpret_cast<const uint32_t*>(hi + kk + 8 + 2 * t);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        // Column j of the lane's 8: the low (even j) or high (odd j) halves
        // of word j / 2 of two rows, lower k in the low half.
        const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
        const uint32_t b0 = __byte_perm(Word(s.r[0], j / 2), Word(s.r[1], j / 2), sel);
        const uint32_t b1 = __byte_perm(Word(s.r[2], j / 2), Word(s.r[3], j / 2), sel);
        Mma<T>(acc[mt][j], a0, a1, a2, a3, b0, b1);
      }
    }
  }
}

// Two blocks per SM for one m16 tile with 16-byte loads; the scalar-load
// variant and two m16 tiles need more than 128 registers a thread.
template <typename T, int MT16, bool kTransB, bool kVec>
__global__ void __launch_bounds__(kThreads, MT16 == 1 && kVec ? 2 : 1)
    DecodeGemmMmaKernel(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b,
                        T* __restrict__ c, float* __restrict__ partial, int m_total,
                        int64_t n_total, int64_t k_total, int slab, int warp_k, float alpha) {
  extern __shared__ uint4 smem16[];
  constexpr int TN = kTileN<kTransB>;
  constexpr int SK = kStepK<kTransB>;
  constexpr int ROWS = 16 * MT16;
  constexpr int NJ = kTransB ? 4 : 8;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * TN;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * slab;
  const int slab_len = static_cast<int>(k_total - k0 < slab ? k_total - k0 : slab);
  const int stride = slab + kPad<kTransB>;
  uint16_t* a_s = reinterpret_cast<uint16_t*>(smem16);

  // This warp's part of the slab; the first window of b is requested
  // before a is staged so that the two latencies overlap.
  const int wk0 = warp * warp_k;
  const int wk1 = wk0 + warp_k < slab_len ? wk0 + warp_k : slab_len;
  const int steps = wk1 > wk0 ? (wk1 - wk0 + SK - 1) / SK : 0;
  auto load = [&](int step) {
    const int64_t k = k0 + wk0 + static_cast<int64_t>(step) * SK;
    return LoadStage<kTransB, kVec>(b, n_total, k_total, step < steps ? k : k_total, k0 + wk1, n0,
                                    g, t);
  };
  Stage window[kStages];
#pragma unroll
  for (int d = 0; d < kStages; ++d) window[d] = load(d);

  // a's rows as raw 16-bit values, zeros past M and past the slab: a warp
  // per row, 16 bytes a lane where the rows allow it. Aligned rows go
  // global -> shared with cp.async: every copy of the slab is in flight at
  // once and none holds a register (loads through registers made each warp
  // wait out one L2 round trip per 512 bytes, and the b window already
  // takes 64 registers a lane).
  const bool a_vec = (reinterpret_cast<uintptr_t>(a) & 15) == 0 && k_total % 8 == 0;
  for (int m = warp; m < ROWS; m += kWarps) {
    const uint16_t* src = a + m * k_total + k0;
    uint16_t* dst = a_s + m * stride;
    for (int kk = 8 * lane; kk < slab; kk += 8 * 32) {
      if (m < m_total && kk < slab_len && a_vec) {  // slab_len is then a multiple of 8 too
        CpAsync16(dst + kk, src + kk);
        continue;
      }
      uint4 v = make_uint4(0, 0, 0, 0);
      if (m < m_total && kk < slab_len) {
        uint32_t w[4] = {0, 0, 0, 0};
        for (int e = 0; e < 8 && kk + e < slab_len; ++e)
          w[e / 2] |= static_cast<uint32_t>(src[kk + e]) << (16 * (e % 2));
        v = make_uint4(w[0], w[1], w[2], w[3]);
      }
      *reinterpret_cast<uint4*>(dst + kk) = v;
    }
  }
  CpAsyncWaitAll();
  __syncthreads();

  float acc[MT16][NJ][4];
#pragma unroll
  for (int mt = 0; mt < MT16; ++mt)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.0f;
  for (int s0 = 0; s0 < steps; s0 += kStages) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) {
      if (s0 + d < steps) {
        const Stage cur = window[d];
        window[d] = load(s0 + d + kStages);
        ComputeStage<T, MT16, kTransB>(cur, a_s, stride, wk0 + (s0 + d) * SK, g, t, acc);
      }
    }
  }

  // Across warps, in warp order, in shared memory (a is done with).
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem16);  // [ROWS][TN]
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int mt = 0; mt < MT16; ++mt)
#pragma unroll
        for (int j = 0; j < NJ; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            // Accumulator e: row g (+8 for e >= 2), fragment column 2t (+1 for odd e).
            const int m = mt * 16 + g + 8 * (e >> 1);
            const int fc = 2 * t + (e & 1);
            const int col = kTransB ? 8 * j + fc : 8 * fc + j;
            float& r = red[m * TN + col];
            r = w == 0 ? acc[mt][j][e] : r + acc[mt][j][e];
          }
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < ROWS * TN; i += kThreads) {
    const int m = i / TN, col = i - m * TN;
    const int64_t n = n0 + col;
    if (m >= m_total || n >= n_total) continue;
    const int64_t at = m * n_total + n;
    if (partial == nullptr)
      c[at] = FromFloat<T>(alpha * red[i]);
    else
      partial[static_cast<int64_t>(blockIdx.y) * m_total * n_total + at] = red[i];
  }
}

// Which instantiation of the kernel runs: m16 tiles of a, the layout of b,
// 16-byte loads of b.
template <int MT16, bool kTransB, bool kVec>
struct Variant {
  static constexpr int kMT16 = MT16;
  static constexpr bool kTrans = kTransB;
  static constexpr bool kVecLoads = kVec;
};

template <typename F>
cudaError_t VisitVariant(int m, bool trans_b, bool vec, F&& f) {
  if (trans_b) {
    if (vec) return m <= 16 ? f(Variant<1, true, true>{}) : f(Variant<2, true, true>{});
    return m <= 16 ? f(Variant<1, true, false>{}) : f(Variant<2, true, false>{});
  }
  if (vec) return m <= 16 ? f(Variant<1, false, true>{}) : f(Variant<2, false, true>{});
  return m <= 16 ? f(Variant<1, false, false>{}) : f(Variant<2, false, false>{});
}

// One launch of the kernel, from PlanGemmDecodeMma.
struct Plan {
  int m = 0;
  int64_t n = 0, k = 0;
  bool trans_b = false;
  bool vec = false;   // 16-byte loads of b
  int64_t tiles = 0;  // grid.x
  decode_gemm::SplitPlan split;
  size_t smem = 0;             // dynamic shared memory per block
  size_t workspace_bytes = 0;  // float32 partials; 0 for one split
};

// Plans c [m, n] = alpha * a [m, k] @ b (b [k, n], or [n, k] when trans_b)
// on a device of compute capability `cc` (major * 10 + minor) with sm_count
// SMs. `prepare` is the caller's per-device kernel setup, as for
// decode_fma::PlanGemmDecodeFma; its errors are passed through. b picks the
// variant (16-byte loads where its alignment allows), so GemmDecodeMma must
// be given the same b. Refusals: cudaErrorNotSupported below compute
// capability 8.0; cudaErrorInvalidValue for m outside 1..32, n or k < 1
// (the caller handles empty shapes; k = 0 is c = 0) and for a shape too
// large for the grid (more than 65535 splits of K or INT_MAX column tiles).
template <typename T, typename Prepare>
cudaError_t PlanGemmDecodeMma(const T* b, int m, int64_t n, int64_t k, bool trans_b, int cc,
                              int sm_count, Prepare&& prepare, Plan* plan) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
  if (cc < 80) return cudaErrorNotSupported;
  if (m < 1 || m > 32 || n < 1 || k < 1) return cudaErrorInvalidValue;
  // 16-byte loads need 16-byte aligned rows: the base and the row length
  // (K for [N, K], N for [K, N]) a multiple of 8 elements.
  const bool vec = IsAligned16(b) && (trans_b ? k : n) % 8 == 0;
  return VisitVariant(m, trans_b, vec, [&](auto v) -> cudaError_t {
    using V = decltype(v);
    constexpr int TN = kTileN<V::kTrans>;
    constexpr int SK = kStepK<V::kTrans>;
    constexpr int ROWS = 16 * V::kMT16;
    int bps = 0;
    int smem_limit = 0;
    if (const cudaError_t e = prepare(DecodeGemmMmaKernel<T, V::kMT16, V::kTrans, V::kVecLoads>,
                                      kMmaSmemBytes, &bps, &smem_limit);
        e != cudaSuccess)
      return e;
    Plan p;
    p.m = m, p.n = n, p.k = k, p.trans_b = trans_b, p.vec = vec;
    p.tiles = (n + TN - 1) / TN;
    const int64_t unit = int64_t{kWarps} * SK;
    const int64_t max_slab =
        std::max<int64_t>(unit, (smem_limit / 2 / ROWS - kPad<V::kTrans>) / unit * unit);
    p.split = decode_gemm::PlanSplits(sm_count, k, p.tiles, SK, max_slab, bps);
    if (p.split.splits > 65535 || p.tiles > INT_MAX) return cudaErrorInvalidValue;
    const size_t a_bytes =
        static_cast<size_t>(ROWS) * static_cast<size_t>(p.split.slab + kPad<V::kTrans>) * 2;
    p.smem = std::max(a_bytes, static_cast<size_t>(ROWS) * TN * sizeof(float));
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
// a b that no longer allows the plan's 16-byte loads.
template <typename T>
cudaError_t GemmDecodeMma(const Plan& p, const T* a, const T* b, T* c, float alpha,
                          float* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (p.split.splits > 1 && (workspace == nullptr || workspace_bytes < p.workspace_bytes))
    return cudaErrorInvalidValue;
  if (p.vec && !IsAligned16(b)) return cudaErrorInvalidValue;
  float* partial = p.split.splits > 1 ? workspace : nullptr;
  return VisitVariant(p.m, p.trans_b, p.vec, [&](auto v) {
    using V = decltype(v);
    const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(p.split.splits));
    DecodeGemmMmaKernel<T, V::kMT16, V::kTrans, V::kVecLoads><<<grid, kThreads, p.smem, stream>>>(
        reinterpret_cast<const uint16_t*>(a), reinterpret_cast<const uint16_t*>(b), c, partial, p.m,
        p.n, p.k, static_cast<int>(p.split.slab), static_cast<int>(p.split.warp_k), alpha);
    return cudaGetLastError();
  });
}

}  // namespace kerneld::cuda::decode_mma
