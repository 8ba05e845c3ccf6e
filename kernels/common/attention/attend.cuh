// The CUDA attention of batch_decode_paged, batch_prefill_paged and
// batch_prefill_ragged (FlashInfer decode.cuh's shape, one kernel for the
// three): a block takes one query row, G query heads that share a kv head,
// and one chunk of that row's keys (split-KV: many chunks when the batch is
// small, merged by AttendMergeKernel). Its 4 warps take every 4th key; a
// lane holds D/32 elements of q, k, v (one vector load per key row); the
// dot products reduce across the warp; the softmax is online in float32;
// the warps' states merge through shared memory. The next key's k and v
// are loaded before the current one is used (two rows in flight a warp).
//
// Every index is re-read and clamped here (the arrays may be client memory
// that changes after the check), and a set *err (the check kernel's flag,
// common/attention/check.cuh) makes every block return at once: a hostile
// index never makes this read outside a buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/vec.cuh"
#ifndef __CUDACC_RTC__
#include "common/attention/plan.h"  // HeadsPerBlock
#endif

namespace kerneld::cuda::attention {

inline constexpr int kAttendWarps = 4;

struct KvIndex {
  const int32_t* indptr = nullptr;   // [batch + 1]
  const int32_t* indices = nullptr;  // paged: [nnz_pages]; nullptr: ragged rows
  const int32_t* last_page_len = nullptr;
  int64_t nnz = 0;  // paged: entries of indices; ragged: rows of k / v
  int64_t max_pages = 0;
  int page_size = 1;
};

struct AttendParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;
  float* part_o = nullptr;    // chunks > 1: [chunks, rows, hq, D]
  float* part_lse = nullptr;  // [chunks, rows, hq]
  const int* err = nullptr;
  // decode_mma.cuh's own check: set (to 1) where an index the kernel reads
  // is out of range; nullptr: the check kernel ran first (err).
  int* bad = nullptr;
  KvIndex kv;
  const int32_t* qo_indptr = nullptr;  // nullptr: row b is request b's only query (decode)
  int batch = 0;
  int64_t rows = 0;  // query rows (nnz_q)
  int hq = 1, hkv = 1, group = 1, chunks = 1;
  bool causal = false;
  float scale = 1, cap = 0;
};

__device__ __forceinline__ int64_t Clamp64(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

template <int kBytes>
struct VecBytes;
template <>
struct VecBytes<4> {
  using type = uint32_t;
};
template <>
struct VecBytes<8> {
  using type = uint2;
};
template <>
struct VecBytes<16> {
  using type = uint4;
};

// N elements of T at p (aligned to N * sizeof(T)) widened to float.
template <typename T, int N>
__device__ __forceinline__ void LoadVec(const T* p, float* out) {
  using V = typename VecBytes<N * sizeof(T)>::type;
  union {
    V v;
    T t[N];
  } u;
  u.v = __ldg(reinterpret_cast<const V*>(p));
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = ToFloat(u.t[i]);
}

template <typename T, int N>
__device__ __forceinline__ void StoreVec(T* p, const float* in) {
  using V = typename VecBytes<N * sizeof(T)>::type;
  union {
    V v;
    T t[N];
  } u;
#pragma unroll
  for (int i = 0; i < N; ++i) u.t[i] = FromFloat<T>(in[i]);
  *reinterpret_cast<V*>(p) = u.v;
}

// The most keys any request of kv can have: every page's slots (paged) or
// every row (ragged). The host's bound for the kernels' 32-bit arithmetic.
inline __host__ __device__ int64_t MaxKeys(const KvIndex& kv) {
  return kv.indices != nullptr ? kv.nnz * kv.page_size : kv.nnz;
}

// Request b's key range: the first row (ragged) or page slot, and kv_len.
struct KvRange {
  int64_t begin = 0;
  int64_t len = 0;
};

__device__ __forceinline__ KvRange RangeOf(const KvIndex& kv, int b) {
  KvRange r;
  const int64_t begin = Clamp64(kv.indptr[b], 0, kv.nnz);
  const int64_t end = Clamp64(kv.indptr[b + 1], begin, kv.nnz);
  r.begin = begin;
  if (kv.indices == nullptr) {
    r.len = end - begin;
  } else if (end > begin) {
    const int64_t last = Clamp64(kv.last_page_len[b], 1, kv.page_size);
    r.len = (end - begin - 1) * kv.page_size + last;
  }
  return r;
}

// The cache row (token) of key j of a range.
__device__ __forceinline__ int64_t TokenOf(const KvIndex& kv, const KvRange& r, int64_t j) {
  if (kv.indices == nullptr) return r.begin + j;
  const int64_t page = Clamp64(kv.indices[r.begin + j / kv.page_size], 0, kv.max_pages - 1);
  return page * kv.page_size + j % kv.page_size;
}

// Element e of (query row x head) rh's result: o and lse when the keys are
// one chunk, else the chunk's partials for AttendMergeKernel. The row
// kernel's and the tensor-core decode's (decode_mma.cuh) last step.
template <typename T, int D>
__device__ __forceinline__ void WriteResult(const AttendParams& p, int chunk, int64_t rh, int e,
                                            float out, float lse) {
  if (p.chunks == 1) {
    static_cast<T*>(p.o)[rh * D + e] = FromFloat<T>(out);
    if (e == 0) p.lse[rh] = lse;
  } else {
    const int64_t at = chunk * p.rows * p.hq + rh;
    p.part_o[at * D + e] = out;
    if (e == 0) p.part_lse[at] = lse;
  }
}

template <typename T, int D, int G>
__global__ void __launch_bounds__(kAttendWarps * 32) AttendKernel(AttendParams p) {
  if (p.err != nullptr && *p.err != 0) return;
  constexpr int N = D / 32;
  if (p.qo_indptr != nullptr && p.batch <= 0) return;
  const int chunk = blockIdx.y;
  const int64_t row = blockIdx.x;
  const int h0 = blockIdx.z * G;
  const int hk = h0 / p.group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  // The row's request and its place in it.
  int b = 0;
  int64_t i = 0, qo_len = 1;
  if (p.qo_indptr == nullptr) {
    b = static_cast<int>(row);
  } else {
    int lo = 0, hi = p.batch - 1;  // the last request starting at or before row
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (p.qo_indptr[mid] <= row)
        lo = mid;
      else
        hi = mid - 1;
    }
    b = lo;
    const int64_t start = Clamp64(p.qo_indptr[b], 0, p.rows);
    qo_len = Clamp64(p.qo_indptr[b + 1], start, p.rows) - start;
    i = row - start;
  }
  const KvRange range = RangeOf(p.kv, b);
  int64_t seen = range.len;
  if (p.causal) seen = Clamp64(i + range.len - qo_len + 1, 0, range.len);
  if (i < 0 || i >= qo_len) seen = 0;  // not a row of its request (indices changed under us)
  const int64_t per = (seen + p.chunks - 1) / p.chunks;
  const int64_t j0 = chunk * per, j1 = j0 + per < seen ? j0 + per : seen;

  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k);
  const T* vc = static_cast<const T*>(p.v);
  float qv[G][N], acc[G][N], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    LoadVec<T, N>(q + (row * p.hq + h0 + g) * D + lane * N, qv[g]);
#pragma unroll
    for (int e = 0; e < N; ++e) acc[g][e] = 0;
    m[g] = -INFINITY;
    l[g] = 0;
  }
  const int64_t stride = int64_t{p.hkv} * D;
  float kn[N], vn[N];
  int64_t j = j0 + warp;
  if (j < j1) {
    const int64_t at = TokenOf(p.kv, range, j) * stride + hk * D + lane * N;
    LoadVec<T, N>(kc + at, kn);
    LoadVec<T, N>(vc + at, vn);
  }
  for (; j < j1; j += kAttendWarps) {
    float kr[N], vr[N];
#pragma unroll
    for (int e = 0; e < N; ++e) kr[e] = kn[e], vr[e] = vn[e];
    if (j + kAttendWarps < j1) {
      const int64_t at = TokenOf(p.kv, range, j + kAttendWarps) * stride + hk * D + lane * N;
      LoadVec<T, N>(kc + at, kn);
      LoadVec<T, N>(vc + at, vn);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float dot = 0;
#pragma unroll
      for (int e = 0; e < N; ++e) dot += qv[g][e] * kr[e];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      float x = p.scale * dot;
      if (p.cap > 0) x = p.cap * tanhf(x / p.cap);
      const float mn = fmaxf(m[g], x);
      const float corr = __expf(m[g] - mn), w = __expf(x - mn);
      l[g] = l[g] * corr + w;
#pragma unroll
      for (int e = 0; e < N; ++e) acc[g][e] = acc[g][e] * corr + w * vr[e];
      m[g] = mn;
    }
  }

  // The warps' states merged: each warp's (m, l, acc) to shared memory.
  __shared__ float sm[kAttendWarps][G], sl[kAttendWarps][G];
  __shared__ float sacc[kAttendWarps][G][D];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < N; ++e) sacc[warp][g][lane * N + e] = acc[g][e];
    if (lane == 0) sm[warp][g] = m[g], sl[warp][g] = l[g];
  }
  __syncthreads();
  for (int t = threadIdx.x; t < G * D; t += kAttendWarps * 32) {
    const int g = t / D, e = t % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kAttendWarps; ++w) mx = fmaxf(mx, sm[w][g]);
    float sum = 0, out = 0;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kAttendWarps; ++w) {
        const float s = __expf(sm[w][g] - mx);
        sum += sl[w][g] * s;
        out += sacc[w][g][e] * s;
      }
      out /= sum;
    }
    const float lse = mx == -INFINITY ? -INFINITY : mx + __logf(sum);
    WriteResult<T, D>(p, chunk, row * p.hq + h0 + g, e, out, lse);
  }
}

// The chunks' partial (o, lse) of each (row, head) merged: one block of D
// threads a (row, head).
template <typename T, int D>
__global__ void __launch_bounds__(D) AttendMergeKernel(AttendParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched as a programmatic dependent (decode_mma.cuh, sm_90): it may
  // start while the chunks' kernel ends; their partials are read after
  // this wait. Without that launch attribute it returns at once.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (p.err != nullptr && *p.err != 0) return;
  const int64_t rh = blockIdx.x;
  const int e = threadIdx.x;
  const int64_t n = p.rows * p.hq;
  float mx = -INFINITY;
  for (int c = 0; c < p.chunks; ++c) mx = fmaxf(mx, p.part_lse[c * n + rh]);
  float sum = 0, out = 0;
  if (mx != -INFINITY) {
    for (int c = 0; c < p.chunks; ++c) {
      const float w = __expf(p.part_lse[c * n + rh] - mx);
      sum += w;
      out += w * p.part_o[(c * n + rh) * D + e];
    }
    out /= sum;
  }
  static_cast<T*>(p.o)[rh * D + e] = FromFloat<T>(out);
  if (e == 0) p.lse[rh] = mx == -INFINITY ? -INFINITY : mx + __logf(sum);
}

#ifndef __CUDACC_RTC__

// Chunks of each row's keys: enough blocks for two waves of the device,
// no chunk under 256 keys on average (the merge would cost more).
inline int ChunksFor(int64_t rows, int heads_blocks, int64_t avg_keys, int sm_count) {
  const int64_t blocks = rows * heads_blocks;
  int64_t c = (2 * int64_t{sm_count} + blocks - 1) / (blocks > 0 ? blocks : 1);
  const int64_t by_keys = (avg_keys + 255) / 256;
  if (c > by_keys) c = by_keys;
  if (c > 64) c = 64;
  return c < 1 ? 1 : static_cast<int>(c);
}

// Bytes of float workspace Attend needs for `chunks` (0 for one chunk).
inline size_t AttendWorkspaceBytes(int chunks, int64_t rows, int hq, int d) {
  if (chunks <= 1) return 0;
  return static_cast<size_t>(chunks) * static_cast<size_t>(rows) * static_cast<size_t>(hq) *
         (static_cast<size_t>(d) + 1) * sizeof(float);
}

// Launches the attention of p (p.part_o / p.part_lse set when chunks > 1).
template <typename T, int D>
cudaError_t Attend(const AttendParams& p, cudaStream_t s) {
  if (p.rows == 0 || p.hq == 0) return cudaSuccess;
  const int g = HeadsPerBlock(p.group);
  if (p.rows > 2147483647 || p.hq / g > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.chunks),
                  static_cast<unsigned>(p.hq / g));
  const dim3 block(kAttendWarps * 32);
  switch (g) {
    case 8:
      AttendKernel<T, D, 8><<<grid, block, 0, s>>>(p);
      break;
    case 4:
      AttendKernel<T, D, 4><<<grid, block, 0, s>>>(p);
      break;
    case 2:
      AttendKernel<T, D, 2><<<grid, block, 0, s>>>(p);
      break;
    default:
      AttendKernel<T, D, 1><<<grid, block, 0, s>>>(p);
      break;
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (p.chunks > 1) {
    AttendMergeKernel<T, D><<<static_cast<unsigned>(p.rows * p.hq), D, 0, s>>>(p);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::attention
