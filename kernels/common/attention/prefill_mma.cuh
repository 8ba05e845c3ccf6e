// The tensor-core prefill of batch_prefill_paged and batch_prefill_ragged
// (FlashAttention-2's loop on mma.sync.m16n8k16, float16 / bfloat16 with
// float32 accumulation), head_dim 64 and 128, compute capability 8.0+.
//
// A block owns a tile of kMmaRows "M rows" of one request: `pack` query
// heads that share a kv head (GQA) times kMmaRows / pack query rows, so
// every key and value tile read feeds all the heads of the group. Its 4
// warps take 16 M rows each. The request's keys stream through shared
// memory kMmaKeys at a time (cp.async, two buffers: the next tile loads
// while this one is used; a paged cache is gathered page by page as it
// loads, zeros past the keys the tile may see). Per key tile a warp
// computes S = Q K^T (fragments through ldmatrix from XOR-swizzled rows,
// no bank conflicts), masks (causal, bottom-right; the cache's end) only
// on the tiles that need it, runs the online softmax in float32 in the
// log2 domain, and adds P V with P rounded to q's dtype (as FlashAttention
// does; the row sums stay float32). o is divided by the row sum and
// rounded once; lse is natural-log.
//
// Which tile a block takes comes from a prefix of the requests' tile
// counts (PrefillTilesKernel, one block, before the main kernel; the
// host cannot read qo_indptr). The last tiles of a request launch first:
// with causal they see the most keys. Every index is re-read and clamped
// here, as in attend.cuh, and a set *err makes both kernels return at once.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/attention/attend.cuh"
#include "common/attention/plan.h"
#include "common/cuda/block_reduce.cuh"
#include "common/cuda/mma.cuh"

namespace kerneld::cuda::attention {

inline constexpr int kMmaThreads = 32 * kMmaWarps;  // kMmaWarps, kMmaRows, kMmaKeys: plan.h

struct PrefillMmaParams {
  AttendParams a;
  int64_t* tile_start = nullptr;  // [batch + 1]: each request's first tile
  int pack = 1;                   // query heads a block (dividing the group)
  int rows_per_tile = kMmaRows;   // query rows a block: kMmaRows / pack
};

// Element offset of 16-byte chunk c of row r in a [rows, D] tile: chunks
// XOR-swizzled by the row's low 3 bits, so the 8 rows an ldmatrix phase
// reads fall in 8 distinct bank groups.
template <int D>
__device__ __forceinline__ int Swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

// TokenOf (attend.cuh) with 32-bit division: a request's keys are fewer
// than 2^31 here (PrefillMmaTakes).
__device__ __forceinline__ int64_t TokenOf32(const KvIndex& kv, const KvRange& r, int64_t j) {
  if (kv.indices == nullptr) return r.begin + j;
  const uint32_t jj = static_cast<uint32_t>(j), ps = static_cast<uint32_t>(kv.page_size);
  const uint32_t pg = jj / ps;
  const int64_t page = Clamp64(kv.indices[r.begin + pg], 0, kv.max_pages - 1);
  return page * kv.page_size + (jj - pg * ps);
}

// tile_start[b] = the tiles of requests before b (rows_per_tile query rows
// a tile), tile_start[batch] = all of them. One block, its size a multiple
// of 32.
static __global__ void PrefillTilesKernel(const int32_t* qo_indptr, int batch, int64_t rows,
                                          int rows_per_tile, int64_t* tile_start, const int* err) {
  if (err != nullptr && *err != 0) return;
  __shared__ int64_t scratch[32];
  int64_t carry = 0;  // the tiles of the chunks before (the same in every thread)
  for (int base = 0; base < batch; base += blockDim.x) {
    const int b = base + threadIdx.x;
    int64_t n = 0;
    if (b < batch) {
      const int64_t start = Clamp64(qo_indptr[b], 0, rows);
      n = (Clamp64(qo_indptr[b + 1], start, rows) - start + rows_per_tile - 1) / rows_per_tile;
    }
    int64_t total = 0;
    const int64_t before = blockops::ExclusiveScan(n, scratch, &total);
    if (b < batch) tile_start[b] = carry + before;
    carry += total;
  }
  if (threadIdx.x == 0) tile_start[batch] = carry;
}

template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads) PrefillMmaKernel(PrefillMmaParams pp) {
  const AttendParams& p = pp.a;
  if (p.err != nullptr && *p.err != 0) return;
  if (p.batch <= 0) return;
  constexpr int kChunks = D / 8;  // 16-byte chunks of a row
  constexpr int kSteps = D / 16;  // k16 steps of q . k
  constexpr int kTilesD = D / 8;  // n8 tiles of o
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);
  T* sk = sq + kMmaRows * D;      // [2][kMmaKeys][D]
  T* sv = sk + 2 * kMmaKeys * D;  // [2][kMmaKeys][D]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // The block's request: the last whose first tile is at or before it.
  const int64_t t = blockIdx.x;
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (pp.tile_start[mid] <= t)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int b = lo;
  const int64_t first = pp.tile_start[b], tiles = pp.tile_start[b + 1] - first;
  if (t < first || t - first >= tiles) return;
  const int64_t start = Clamp64(p.qo_indptr[b], 0, p.rows);
  const int64_t qo_len = Clamp64(p.qo_indptr[b + 1], start, p.rows) - start;
  const int64_t i0 = (tiles - 1 - (t - first)) * pp.rows_per_tile;  // last tiles first
  const int64_t left = qo_len - i0;
  const int nrows = left < pp.rows_per_tile ? static_cast<int>(left) : pp.rows_per_tile;
  if (nrows <= 0) return;  // qo_indptr changed since the tiles were counted
  const int pack = pp.pack;
  const int h0 = blockIdx.y * pack, hk = h0 / p.group;
  const KvRange range = RangeOf(p.kv, b);
  const int64_t kv_len = range.len;
  const int64_t shift = kv_len - qo_len;  // causal: row i sees keys j <= i + shift
  // Keys some row of the tile sees, and keys every row sees (no mask).
  const int64_t kmax = p.causal ? Clamp64(i0 + nrows + shift, 0, kv_len) : kv_len;
  const int64_t kall = p.causal ? Clamp64(i0 + 1 + shift, 0, kv_len) : kv_len;
  const int64_t ntiles = (kmax + kMmaKeys - 1) / kMmaKeys;

  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k);
  const T* vc = static_cast<const T*>(p.v);
  // M row m is query row i0 + m / pack, head h0 + m % pack.
  for (int c = tid; c < kMmaRows * kChunks; c += kMmaThreads) {
    const int m = c / kChunks, ch = c % kChunks, r = m / pack;
    const bool ok = r < nrows;
    const T* src = ok ? q + ((start + i0 + r) * p.hq + h0 + m % pack) * D + ch * 8 : q;
    mma::CpAsync16(sq + Swz<D>(m, ch), src, ok);
  }
  // A key tile: thread tid copies chunk tid % kChunks of kPasses rows, one
  // pass kRowStep rows apart. The kChunks lanes that share those rows each
  // find one row's cache row (its page) and pass it round.
  constexpr int kRowStep = kMmaThreads / kChunks;
  constexpr int kPasses = kMmaKeys / kRowStep;
  static_assert(kPasses <= kChunks, "a row group has a lane for each of its rows");
  const int ch = tid % kChunks, n0 = tid / kChunks, group_lane0 = lane & ~(kChunks - 1);
  const int64_t stride = int64_t{p.hkv} * D;
  auto load_kv = [&](int64_t j, int buf) {
    T* dk = sk + buf * kMmaKeys * D;
    T* dv = sv + buf * kMmaKeys * D;
    int64_t mine = 0;
    if (ch < kPasses && j * kMmaKeys + n0 + ch * kRowStep < kmax)
      mine = TokenOf32(p.kv, range, j * kMmaKeys + n0 + ch * kRowStep) * stride;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int n = n0 + i * kRowStep;
      const int64_t row = __shfl_sync(0xffffffffu, mine, group_lane0 + i);
      const bool ok = j * kMmaKeys + n < kmax;
      const int64_t at = ok ? row + hk * D + ch * 8 : 0;
      mma::CpAsync16(dk + Swz<D>(n, ch), kc + at, ok);
      mma::CpAsync16(dv + Swz<D>(n, ch), vc + at, ok);
    }
  };
  mma::CpAsyncCommit();
  if (ntiles > 0) load_kv(0, 0);
  mma::CpAsyncCommit();
  mma::CpAsyncWait<1>();  // q (the keys may still be on their way)
  __syncthreads();
  uint32_t qa[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    mma::Ldsm4<false>(qa[kk], sq + Swz<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));

  constexpr float kLog2e = 1.4426950408889634f;
  const float scale2 = p.scale * kLog2e;
  // The thread's two M rows (r0 and r0 + 8 of its warp's 16) and their query rows.
  const int r0 = warp * 16 + (lane >> 2);
  const int64_t limit[2] = {i0 + r0 / pack + shift, i0 + (r0 + 8) / pack + shift};
  float o[kTilesD][4];
#pragma unroll
  for (int dn = 0; dn < kTilesD; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0;
  float mx2[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};  // max in log2 units; row sums

  for (int64_t j = 0; j < ntiles; ++j) {
    if (j + 1 < ntiles) {
      load_kv(j + 1, static_cast<int>((j + 1) & 1));
      mma::CpAsyncCommit();
      mma::CpAsyncWait<1>();
    } else {
      mma::CpAsyncWait<0>();
    }
    __syncthreads();
    const T* bk = sk + (j & 1) * kMmaKeys * D;
    const T* bv = sv + (j & 1) * kMmaKeys * D;

    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0;
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
      for (int np = 0; np < kMmaKeys / 16; ++np) {
        uint32_t r[4];
        mma::Ldsm4<false>(
            r, bk + Swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)));
        mma::Mma<T>(s[2 * np], qa[kk], r[0], r[1]);
        mma::Mma<T>(s[2 * np + 1], qa[kk], r[2], r[3]);
      }

    // Logits in log2 units; keys past what a row sees are -inf.
    const int64_t j0 = j * kMmaKeys;
    const bool mask = j0 + kMmaKeys > kall;
#pragma unroll
    for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e];
        x = p.cap > 0 ? p.cap * tanhf(x * p.scale / p.cap) * kLog2e : x * scale2;
        if (mask) {
          const int64_t key = j0 + nt * 8 + (lane & 3) * 2 + (e & 1);
          if (key >= kv_len || (p.causal && key > limit[e >> 1])) x = -INFINITY;
        }
        s[nt][e] = x;
      }
    }
    // Online softmax of the thread's two rows (a row's 64 keys lie in the
    // 4 lanes of a quad).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) m = fmaxf(m, fmaxf(s[nt][2 * h], s[nt][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      const float mn = fmaxf(mx2[h], m);
      const float base = mn == -INFINITY ? 0.f : mn;  // a row that has seen nothing yet
      const float corr = exp2f(mx2[h] - base);
      mx2[h] = mn;
      float add = 0;
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
        s[nt][2 * h] = exp2f(s[nt][2 * h] - base);
        s[nt][2 * h + 1] = exp2f(s[nt][2 * h + 1] - base);
        add += s[nt][2 * h] + s[nt][2 * h + 1];
      }
      sum[h] = sum[h] * corr + add;
#pragma unroll
      for (int dn = 0; dn < kTilesD; ++dn) o[dn][2 * h] *= corr, o[dn][2 * h + 1] *= corr;
    }
    // o += P V: P's accumulator tiles are the A fragments of the k16 steps.
#pragma unroll
    for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
      const uint32_t a[4] = {mma::Pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                             mma::Pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                             mma::Pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             mma::Pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kTilesD / 2; ++dp) {
        uint32_t r[4];
        mma::Ldsm4<true>(
            r, bv + Swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * dp + (lane >> 4)));
        mma::Mma<T>(o[2 * dp], a, r[0], r[1]);
        mma::Mma<T>(o[2 * dp + 1], a, r[2], r[3]);
      }
    }
    __syncthreads();  // the buffer is refilled by the next iteration's load
  }

  T* out = static_cast<T*>(p.o);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int m = r0 + 8 * h, r = m / pack;
    if (r >= nrows) continue;
    const int64_t rh = (start + i0 + r) * p.hq + h0 + m % pack;
    const float inv = l > 0 ? 1.f / l : 0.f;
#pragma unroll
    for (int dn = 0; dn < kTilesD; ++dn)
      *reinterpret_cast<uint32_t*>(out + rh * D + dn * 8 + (lane & 3) * 2) =
          mma::Pack2<T>(o[dn][2 * h] * inv, o[dn][2 * h + 1] * inv);
    if ((lane & 3) == 0) p.lse[rh] = l > 0 ? (mx2[h] + log2f(l)) * 0.6931471805599453f : -INFINITY;
  }
}

#ifndef __CUDACC_RTC__

// Shared memory of a block: the q tile and two key and value tiles.
inline size_t PrefillMmaSmemBytes(int d, size_t item) {
  return static_cast<size_t>(kMmaRows + 4 * kMmaKeys) * static_cast<size_t>(d) * item;
}

// Whether the tiled kernel takes p (plan.h's TiledPrefillTakes).
inline bool PrefillMmaTakes(const AttendParams& p, int d) {
  return p.qo_indptr != nullptr &&
         TiledPrefillTakes(p.rows, p.batch, p.hq, p.group, d, MaxKeys(p.kv));
}

// Workspace bytes of PrefillMma: the tile prefix.
inline size_t PrefillMmaWorkspaceBytes(int batch) {
  return (static_cast<size_t>(batch) + 1) * sizeof(int64_t);
}

// Launches the tile prefix, then the tiled prefill of p (PrefillMmaTakes(p)
// holds; tile_start: PrefillMmaWorkspaceBytes of device memory).
template <typename T, int D>
cudaError_t PrefillMma(const AttendParams& a, int64_t* tile_start, cudaStream_t s) {
  PrefillMmaParams pp;
  pp.a = a;
  pp.tile_start = tile_start;
  pp.pack = HeadsPerBlock(a.group);
  pp.rows_per_tile = kMmaRows / pp.pack;
  PrefillTilesKernel<<<1, 1024, 0, s>>>(a.qo_indptr, a.batch, a.rows, pp.rows_per_tile, tile_start,
                                        a.err);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const size_t smem = PrefillMmaSmemBytes(D, sizeof(T));
  // Above 48 KiB a kernel must opt in, on the current device (the worker's).
  if (cudaError_t e =
          cudaFuncSetAttribute(PrefillMmaKernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem));
      e != cudaSuccess)
    return e;
  const int64_t per = pp.rows_per_tile;
  const dim3 grid(static_cast<unsigned>((a.rows + per - 1) / per + a.batch),
                  static_cast<unsigned>(a.hq / pp.pack));
  PrefillMmaKernel<T, D><<<grid, kMmaThreads, smem, s>>>(pp);
  return cudaGetLastError();
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::attention
