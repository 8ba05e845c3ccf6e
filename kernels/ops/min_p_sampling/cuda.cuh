// min_p_sampling, CUDA kernels: one block per row, two passes over the row
// (L1/L2 resident after the first). Pass 1 reduces the row's max; the
// threshold is min_p * max in float32. Pass 2 sums each thread's kept mass
// over its contiguous chunk; one block scan of those masses finds the chunk
// holding u, and its owner walks it (inverse CDF in index order). Every
// reduction and scan has a fixed order and the uniform comes from Philox
// (seed, row), as in top_k_top_p_sampling: the same inputs give the same
// samples. Framework-agnostic: raw pointers, the launcher returns
// cudaError_t.
#pragma once

#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/sampling.cuh"

namespace kerneld::cuda::min_p {

struct Scratch {
  float f[32];
  int i[32];
  int pick;
};

// A token is kept when p > 0 and p >= t (NaN and negatives never are).
__device__ __forceinline__ bool Kept(float v, float t) { return v > 0.0f && v >= t; }

// Within one thread's chunk: the first kept index whose running mass,
// starting from `run`, exceeds u; the chunk's last kept index when none does
// (u past the sum by rounding); -1 when the chunk keeps none.
__device__ __forceinline__ int FindInChunk(const float* row, int64_t begin, int64_t end, float t,
                                           float run, float u) {
  int last = -1;
  for (int64_t i = begin; i < end; ++i) {
    const float v = row[i];
    if (!Kept(v, t)) continue;
    run += v;
    last = static_cast<int>(i);
    if (run > u) return last;
  }
  return last;
}

__global__ void __launch_bounds__(1024)
    MinPKernel(const float* __restrict__ probs, int32_t* __restrict__ out, int64_t rows,
               int64_t vocab, float min_p, unsigned long long seed) {
  namespace bo = blockops;
  __shared__ Scratch sc;
  const int64_t chunk = (vocab + int64_t{blockDim.x} - 1) / int64_t{blockDim.x};
  const auto [begin, end, tid] = ThreadChunkOf(vocab, chunk);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = probs + r * vocab;
    curandStatePhilox4_32_10_t rng;
    InitRowRng(seed, r, &rng);
    float m = 0.0f;  // the max over positive values (0 when none)
    for (int64_t i = begin; i < end; ++i) m = fmaxf(m, __ldg(row + i));
    const float t = min_p * bo::Max(m, 0.0f, sc.f);
    float local = 0.0f;
    for (int64_t i = begin; i < end; ++i) {
      const float v = __ldg(row + i);
      if (Kept(v, t)) local += v;
    }
    float total;
    const float before = bo::ExclusiveScan(local, sc.f, &total);
    int pick = -1;  // no positive finite mass
    if (total > 0.0f && isfinite(total)) {
      // curand_uniform is in (0, 1].
      const float u = (1.0f - curand_uniform(&rng)) * total;
      int owner = bo::Min(local > 0.0f && before + local > u ? tid : INT_MAX, INT_MAX, sc.i);
      bool past_end = false;
      if (owner == INT_MAX) {  // u rounded past every running sum: the last kept token
        owner = bo::Max(local > 0.0f ? tid : -1, -1, sc.i);
        past_end = true;
      }
      if (tid == owner) sc.pick = FindInChunk(row, begin, end, t, before, past_end ? INFINITY : u);
      __syncthreads();
      pick = owner < 0 ? -1 : sc.pick;
    }
    if (threadIdx.x == 0) out[r] = pick;
    __syncthreads();  // sc is reused by the next row
  }
}

// samples[r] for r in [0, rows) from probs [rows, vocab] on `stream`.
inline cudaError_t MinPSampling(const float* probs, int32_t* samples, int64_t rows, int64_t vocab,
                                float min_p, unsigned long long seed, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  // Chunks of about 16 probabilities a thread, up to 1024 threads a row.
  const int64_t want = (vocab + 15) / 16;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<int64_t>((want + 31) / 32 * 32, 32, 1024));
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 30));
  MinPKernel<<<grid, threads, 0, stream>>>(probs, samples, rows, vocab, min_p, seed);
  return cudaGetLastError();
}

}  // namespace kerneld::cuda::min_p
