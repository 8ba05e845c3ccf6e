// top_k_top_p_sampling, CUDA kernels: one block per row, rejection sampling with a
// rising pivot (FlashInfer's scheme), no sort.
//
// A round draws j from the row restricted to {p > pivot} by inverse CDF in
// index order, then counts the tokens above p_j and their mass: j is in the
// top-k / top-p support exactly when fewer than top_k tokens and less than
// top_p of the mass lie above it. If so j is the sample; if not, no token
// with p <= p_j is in the support either, so the pivot rises to p_j and the
// next round draws from what is left. A draw from any superset of the
// support, accepted when it lands inside, is a draw from the support
// renormalized; rounds shrink the candidate set geometrically in
// expectation.
//
// Each thread owns a contiguous chunk of the row, so the inverse CDF needs
// one block scan of per-thread masses (no per-tile scans) and one walk of
// the chunk that holds u; the pass that counts the mass above p_j also
// yields the per-thread masses for the next round's draw. A round is thus
// one pass over the row (L1/L2 resident: 200 KB at V = 50257) and a few
// barriers. Every reduction and scan has a fixed order and the uniforms
// come from Philox (seed, row), so the same inputs give the same samples.
//
// Framework-agnostic: raw pointers, the launcher returns cudaError_t. The
// binding (cuda.cu) adapts the KernelContext.
#pragma once

#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/launch.cuh"
#include "common/cuda/sampling.cuh"

namespace kerneld::cuda::top_k_top_p {

namespace bo = blockops;

struct Scratch {
  float f[32];
  int i[32];
  int pick;
};

// Count and mass of the probabilities > x in row[begin, end), summed in
// index order. kVec: the row is 16-byte aligned and begin, end are
// multiples of 4.
template <bool kVec>
__device__ __forceinline__ void ChunkMass(const float* row, int64_t begin, int64_t end, float x,
                                          int* count, float* mass) {
  int c = 0;
  float m = 0.0f;
  if constexpr (kVec) {
#pragma unroll 4
    for (int64_t i = begin; i < end; i += 4) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(row + i));
      const float v[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (v[j] > x) ++c, m += v[j];
    }
  } else {
#pragma unroll 4
    for (int64_t i = begin; i < end; ++i) {
      const float v = __ldg(row + i);
      if (v > x) ++c, m += v;
    }
  }
  *count = c;
  *mass = m;
}

// Within one thread's chunk: the first index whose running mass over
// {p > pivot}, starting from `run`, exceeds u; the chunk's last such index
// when none does (u past the sum by rounding); -1 when the chunk has none.
__device__ __forceinline__ int FindInChunk(const float* row, int64_t begin, int64_t end,
                                           float pivot, float run, float u) {
  int last = -1;
  for (int64_t i = begin; i < end; ++i) {
    const float v = row[i];
    if (!(v > pivot)) continue;
    run += v;
    last = static_cast<int>(i);
    if (run > u) return last;
  }
  return last;
}

// One block per row; thread t owns the contiguous chunk [t * chunk, ...) so
// that one block scan of the per-thread masses orders the whole row.
template <bool kVec>
__global__ void __launch_bounds__(1024)
    SamplingKernel(const float* __restrict__ probs, int32_t* __restrict__ out, int64_t rows,
                   int64_t vocab, int64_t top_k, float top_p, unsigned long long seed) {
  __shared__ Scratch sc;
  const int64_t chunk = (vocab + 4 * int64_t{blockDim.x} - 1) / (4 * int64_t{blockDim.x}) * 4;
  const auto [begin, end, tid] = ThreadChunkOf(vocab, chunk);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = probs + r * vocab;
    curandStatePhilox4_32_10_t rng;
    InitRowRng(seed, r, &rng);
    // `local`: this thread's mass above the pivot (0: no negatives, no NaNs).
    int count;
    float local;
    ChunkMass<kVec>(row, begin, end, 0.0f, &count, &local);
    const float total = bo::Sum(local, sc.f);
    int pick = -1;  // no positive finite mass
    if (total > 0.0f && isfinite(total)) {
      const float limit = top_p * total;
      float pivot = 0.0f;
      for (;;) {
        // Inverse CDF over {p > pivot} in index order: the block scan finds
        // the chunk, its owner walks it. curand_uniform is in (0, 1].
        float q;
        const float before = bo::ExclusiveScan(local, sc.f, &q);
        const float u = (1.0f - curand_uniform(&rng)) * q;
        int owner = bo::Min(local > 0.0f && before + local > u ? tid : INT_MAX, INT_MAX, sc.i);
        bool past_end = false;
        if (owner == INT_MAX) {  // u rounded past every running sum: the last candidate
          owner = bo::Max(local > 0.0f ? tid : -1, -1, sc.i);
          past_end = true;
        }
        if (owner < 0) break;  // nothing above the pivot (mass underflowed)
        if (tid == owner)
          sc.pick = FindInChunk(row, begin, end, pivot, before, past_end ? INFINITY : u);
        __syncthreads();
        const int j = sc.pick;
        if (j < 0 || (top_k <= 0 && top_p >= 1.0f)) {
          pick = j;
          break;
        }
        // j is in the support when fewer than top_k tokens, holding less
        // than top_p of the mass, lie above it.
        const float pj = row[j];
        float above_local;
        ChunkMass<kVec>(row, begin, end, pj, &count, &above_local);
        const int above_count = bo::Sum(count, sc.i);
        const float above = bo::Sum(above_local, sc.f);
        if ((top_k <= 0 || above_count < top_k) && (top_p >= 1.0f || above < limit)) {
          pick = j;
          break;
        }
        pivot = pj;  // nothing at or below p_j is in the support
        local = above_local;
      }
    }
    if (threadIdx.x == 0) out[r] = pick;
    __syncthreads();  // sc.pick is reused by the next row
  }
}

// samples[r] for r in [0, rows) from probs [rows, vocab] on `stream`,
// restricted to the top_k most probable tokens (top_k <= 0: all) and to
// the smallest set holding top_p of the mass; -1 for a row with no
// positive finite mass.
inline cudaError_t TopKTopPSampling(const float* probs, int32_t* samples, int64_t rows,
                                    int64_t vocab, int64_t top_k, float top_p,
                                    unsigned long long seed, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  // Chunks of about 16 probabilities a thread, up to 1024 threads a row.
  const int64_t want = (vocab + 15) / 16;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<int64_t>((want + 31) / 32 * 32, 32, 1024));
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 30));
  if (vocab % 4 == 0 && IsAligned16(probs))
    SamplingKernel<true>
        <<<grid, threads, 0, stream>>>(probs, samples, rows, vocab, top_k, top_p, seed);
  else
    SamplingKernel<false>
        <<<grid, threads, 0, stream>>>(probs, samples, rows, vocab, top_k, top_p, seed);
  return cudaGetLastError();
}

}  // namespace kerneld::cuda::top_k_top_p
