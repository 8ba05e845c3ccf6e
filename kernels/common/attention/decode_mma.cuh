// The tensor-core decode of batch_decode_paged (FlashDecoding on
// mma.sync.m16n8k16, float16 / bfloat16 with float32 accumulation),
// head_dim 64 and 128, compute capability 8.0+.
//
// Decode reads every key and value once and does little with each: it is
// bound by memory, and what counts is how many bytes are on their way. The
// row kernel (attend.cuh) keeps two key rows in flight a warp and reduces
// each dot product across the warp; here a block streams its keys through
// shared memory kDecodeKeys at a time, kDecodeStages tiles deep (cp.async:
// two tiles load while the third is used; a paged cache is gathered page
// by page as in prefill_mma.cuh), and the arithmetic goes to the tensor
// cores, where it costs next to nothing.
//
// A block owns one request, `pack` query heads that share a kv head (the
// 16 M rows of an m16 tile: rows past `pack` are zeros and ignored) and
// one chunk of the request's keys (split-KV when the batch is small; the
// chunks' (o, lse) merge in attend.cuh's AttendMergeKernel). Each of its 4
// warps takes 16 keys of every tile and keeps its own online softmax
// (S = Q K^T, then P V with P rounded to q's dtype, as in the prefill);
// the warps' states merge through shared memory at the end.
//
// No check kernel runs before this one: each block checks the indices it
// reads itself, by check.cuh's rules (its request's kv_indptr pair and
// kv_last_page_len, and the page of every key it loads; together the
// blocks read every entry the check kernel would), and sets *p.bad where
// one is out of range, which the binding turns into the CPU's message. It
// reads only through clamped indices, so a hostile index still never makes
// it read outside a buffer; what it writes to o under a bad index is
// never returned (the call fails). One launch fewer is most of a small
// decode's time.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "common/attention/attend.cuh"
#include "common/attention/plan.h"
#include "common/attention/prefill_mma.cuh"  // Swz, TokenOf32, kMmaThreads
#include "common/cuda/mma.cuh"

namespace kerneld::cuda::attention {

template <typename T, int D>
__global__ void __launch_bounds__(kMmaThreads) DecodeMmaKernel(AttendParams p, int pack) {
  constexpr int kChunks = D / 8;  // 16-byte chunks of a row
  constexpr int kSteps = D / 16;  // k16 steps of q . k
  constexpr int kTilesD = D / 8;  // n8 tiles of o
  constexpr int kTile = kDecodeKeys * D;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);  // [16][D]
  T* sk = sq + 16 * D;                 // [kDecodeStages][kDecodeKeys][D]
  T* sv = sk + kDecodeStages * kTile;  // [kDecodeStages][kDecodeKeys][D]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int b = blockIdx.x, chunk = blockIdx.y;
  const int h0 = blockIdx.z * pack, hk = h0 / p.group;

  if (tid == 0) {  // the request's indptr pair and last page, as check.cuh tests them
    const int32_t lo = p.kv.indptr[b], hi = p.kv.indptr[b + 1];
    bool bad = (b == 0 && lo < 0) || hi < lo || hi > p.kv.nnz;
    if (hi > lo) {
      const int32_t last = p.kv.last_page_len[b];
      bad |= last < 1 || last > p.kv.page_size;
    }
    if (bad) *p.bad = 1;
  }
  const KvRange range = RangeOf(p.kv, b);
  // Chunks start on tile boundaries; the last ones may be empty.
  const int64_t per =
      ((range.len + p.chunks - 1) / p.chunks + kDecodeKeys - 1) / kDecodeKeys * kDecodeKeys;
  const int64_t j0 = Clamp64(chunk * per, 0, range.len);
  const int64_t j1 = Clamp64(j0 + per, j0, range.len);
  const int ntiles = static_cast<int>((j1 - j0 + kDecodeKeys - 1) / kDecodeKeys);

  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k);
  const T* vc = static_cast<const T*>(p.v);
  for (int c = tid; c < 16 * kChunks; c += kMmaThreads) {
    const int m = c / kChunks, ch = c % kChunks;
    const bool ok = m < pack;
    mma::CpAsync16(sq + Swz<D>(m, ch), ok ? q + (int64_t{b} * p.hq + h0 + m) * D + ch * 8 : q, ok);
  }
  mma::CpAsyncCommit();

  // A key tile: thread tid copies chunk tid % kChunks of kPasses rows, one
  // pass kRowStep rows apart; the kChunks lanes that share those rows each
  // find one row's cache row (its page) and pass it round.
  constexpr int kRowStep = kMmaThreads / kChunks;
  constexpr int kPasses = kDecodeKeys / kRowStep;
  static_assert(kPasses <= kChunks, "a row group has a lane for each of its rows");
  const int ch = tid % kChunks, n0 = tid / kChunks, group_lane0 = lane & ~(kChunks - 1);
  const int64_t stride = int64_t{p.hkv} * D;
  auto load_kv = [&](int t, int buf) {
    T* dk = sk + buf * kTile;
    T* dv = sv + buf * kTile;
    const int64_t base = j0 + int64_t{t} * kDecodeKeys;
    int64_t mine = 0;
    if (ch < kPasses && base + n0 + ch * kRowStep < j1) {
      // TokenOf32, with the page checked before it is clamped.
      const uint32_t jj = static_cast<uint32_t>(base + n0 + ch * kRowStep);
      const uint32_t ps = static_cast<uint32_t>(p.kv.page_size), pg = jj / ps;
      const int32_t raw = p.kv.indices[range.begin + pg];
      if (raw < 0 || raw >= p.kv.max_pages) *p.bad = 1;
      const int64_t page = Clamp64(raw, 0, p.kv.max_pages - 1);
      mine = (page * p.kv.page_size + (jj - pg * ps)) * stride;
    }
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int n = n0 + i * kRowStep;
      const int64_t row = __shfl_sync(0xffffffffu, mine, group_lane0 + i);
      const bool ok = base + n < j1;
      const int64_t at = ok ? row + hk * D + ch * 8 : 0;
      mma::CpAsync16(dk + Swz<D>(n, ch), kc + at, ok);
      mma::CpAsync16(dv + Swz<D>(n, ch), vc + at, ok);
    }
  };
#pragma unroll
  for (int st = 0; st < kDecodeStages - 1; ++st) {
    if (st < ntiles) load_kv(st, st);
    mma::CpAsyncCommit();
  }
  mma::CpAsyncWait<kDecodeStages - 1>();  // q (the tiles may still be on their way)
  __syncthreads();
  uint32_t qa[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    mma::Ldsm4<false>(qa[kk], sq + Swz<D>(lane & 15, 2 * kk + (lane >> 4)));

  constexpr float kLog2e = 1.4426950408889634f;
  const float scale2 = p.scale * kLog2e;
  float o[kTilesD][4];
#pragma unroll
  for (int dn = 0; dn < kTilesD; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0;
  float mx2[2] = {-INFINITY, -INFINITY}, sum[2] = {0, 0};  // max in log2 units; row sums

  for (int t = 0; t < ntiles; ++t) {
    mma::CpAsyncWait<kDecodeStages - 2>();  // tile t
    __syncthreads();                        // ... for every warp; tile t - 1's buffer is free
    const int next = t + kDecodeStages - 1;
    if (next < ntiles) load_kv(next, next % kDecodeStages);
    mma::CpAsyncCommit();
    const T* bk = sk + (t % kDecodeStages) * kTile + warp * 16 * D;
    const T* bv = sv + (t % kDecodeStages) * kTile + warp * 16 * D;

    // S = Q K^T over the warp's 16 keys (two n8 tiles).
    float s[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      uint32_t r[4];
      mma::Ldsm4<false>(r,
                        bk + Swz<D>((lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)));
      mma::Mma<T>(s[0], qa[kk], r[0], r[1]);
      mma::Mma<T>(s[1], qa[kk], r[2], r[3]);
    }
    // Logits in log2 units; keys past the chunk (the last tile's) are -inf.
    const int64_t key0 = j0 + int64_t{t} * kDecodeKeys + warp * 16;
    const bool mask = key0 + 16 > j1;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nt][e];
        x = p.cap > 0 ? p.cap * tanhf(x * p.scale / p.cap) * kLog2e : x * scale2;
        if (mask && key0 + nt * 8 + (lane & 3) * 2 + (e & 1) >= j1) x = -INFINITY;
        s[nt][e] = x;
      }
      // Online softmax of the thread's two M rows (a row's 16 keys lie in
      // the 4 lanes of a quad).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]), fmaxf(s[1][2 * h], s[1][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      const float mn = fmaxf(mx2[h], m);
      const float base = mn == -INFINITY ? 0.f : mn;  // a warp that has seen no key yet
      const float corr = exp2f(mx2[h] - base);
      mx2[h] = mn;
      float add = 0;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        s[nt][2 * h] = exp2f(s[nt][2 * h] - base);
        s[nt][2 * h + 1] = exp2f(s[nt][2 * h + 1] - base);
        add += s[nt][2 * h] + s[nt][2 * h + 1];
      }
      sum[h] = sum[h] * corr + add;
#pragma unroll
      for (int dn = 0; dn < kTilesD; ++dn) o[dn][2 * h] *= corr, o[dn][2 * h + 1] *= corr;
    }
    // o += P V: P's two accumulator tiles are the A fragment of one k16 step.
    const uint32_t a[4] = {mma::Pack2<T>(s[0][0], s[0][1]), mma::Pack2<T>(s[0][2], s[0][3]),
                           mma::Pack2<T>(s[1][0], s[1][1]), mma::Pack2<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < kTilesD / 2; ++dp) {
      uint32_t r[4];
      mma::Ldsm4<true>(r, bv + Swz<D>((lane & 7) + (((lane >> 3) & 1) << 3), 2 * dp + (lane >> 4)));
      mma::Mma<T>(o[2 * dp], a, r[0], r[1]);
      mma::Mma<T>(o[2 * dp + 1], a, r[2], r[3]);
    }
  }

  // The warps' states merged through shared memory (the tiles' space):
  // each warp's o, max and sum of the rows it holds.
  mma::CpAsyncWait<0>();
  __syncthreads();
  float* so = reinterpret_cast<float*>(sk);  // [4 warps][16 rows][D]
  float* sm = so + kMmaWarps * 16 * D;       // [4][16]
  float* sl = sm + kMmaWarps * 16;           // [4][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = sum[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = (lane >> 2) + 8 * h;
    if (r >= pack) continue;
    float* dst = so + (warp * 16 + r) * D + (lane & 3) * 2;
#pragma unroll
    for (int dn = 0; dn < kTilesD; ++dn)
      dst[dn * 8] = o[dn][2 * h], dst[dn * 8 + 1] = o[dn][2 * h + 1];
    if ((lane & 3) == 0) sm[warp * 16 + r] = mx2[h], sl[warp * 16 + r] = l;
  }
  __syncthreads();
  for (int i = tid; i < pack * D; i += kMmaThreads) {
    const int g = i / D, e = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) mx = fmaxf(mx, sm[w * 16 + g]);
    float total = 0, out = 0;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kMmaWarps; ++w) {
        const float f = exp2f(sm[w * 16 + g] - mx);
        total += sl[w * 16 + g] * f;
        out += so[(w * 16 + g) * D + e] * f;
      }
    }
    const bool any = total > 0;
    out = any ? out / total : 0.f;
    const float lse = any ? (mx + log2f(total)) * 0.6931471805599453f : -INFINITY;
    WriteResult<T, D>(p, chunk, int64_t{b} * p.hq + h0 + g, e, out, lse);
  }
}

#ifndef __CUDACC_RTC__

// Shared memory of a block: the q tile and kDecodeStages key and value
// tiles (the warps' merge reuses the tiles' space).
inline size_t DecodeMmaSmemBytes(int d, size_t item) {
  return static_cast<size_t>(16 + 2 * kDecodeStages * kDecodeKeys) * static_cast<size_t>(d) * item;
}

// Launches the tensor-core decode of p (one query row a request; p.chunks
// from DecodeMmaChunks, p.part_o / p.part_lse set when it is above 1; p.bad
// zeroed), then the chunks' merge.
// Above 48 KiB of shared memory a kernel must opt in, once per device
// (the current one, the worker's); devices past 63 opt in every call.
template <typename T, int D>
cudaError_t DecodeMmaOptIn(size_t smem) {
  static std::atomic<uint64_t> done{0};  // a bit a device
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const uint64_t bit = dev < 64 ? uint64_t{1} << dev : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(
      DecodeMmaKernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_release);
  return e;
}

// pdl (compute capability 9.0+): the merge is launched as a programmatic
// dependent of the chunks' kernel, so its launch overlaps that kernel's end
// instead of following it (a microsecond or two of a small decode).
template <typename T, int D>
cudaError_t DecodeMma(const AttendParams& p, cudaStream_t s, bool pdl = false) {
  if (p.rows == 0 || p.hq == 0) return cudaSuccess;
  const int pack = DecodePack(p.group);
  if (p.rows > 2147483647 || p.hq / pack > 65535 || p.chunks > 65535) return cudaErrorInvalidValue;
  const size_t smem = DecodeMmaSmemBytes(D, sizeof(T));
  if (cudaError_t e = DecodeMmaOptIn<T, D>(smem); e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.chunks),
                  static_cast<unsigned>(p.hq / pack));
  DecodeMmaKernel<T, D><<<grid, kMmaThreads, smem, s>>>(p, pack);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (p.chunks <= 1) return cudaSuccess;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(p.rows * p.hq));
  cfg.blockDim = dim3(D);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, AttendMergeKernel<T, D>, p);
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::attention
