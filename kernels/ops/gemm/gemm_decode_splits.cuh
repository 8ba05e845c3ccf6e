// gemm decode kernels, shared by the FMA kernel (cuda.cuh) and the
// register-window tensor-core kernel (gemm_decode_mma.cuh): the block shape,
// how K is split over blocks, and the split-K reduction.
//
// Framework-agnostic: raw pointers, launchers return cudaError_t. The
// reduction kernel is compiled only by nvcc; the rest is plain C++, so
// that host code (the binding header gemm_decode.cuh, and through it
// gemm_gpu_test.cc) can include this header.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "common/cuda/launch.cuh"
#if defined(__CUDACC__)
#include "common/cuda/vec.cuh"
#endif

namespace kerneld::cuda::decode_gemm {

inline constexpr int kWarps = 8;  // per block; they split the block's slab of K
inline constexpr int kThreads = kWarps * 32;

// A block's share of K: `slab` columns of a (in shared memory), `warp_k` of
// them per warp; `splits` blocks along K per column tile.
struct SplitPlan {
  int64_t splits = 1;
  int64_t warp_k = 0;
  int64_t slab = 0;
};

// Enough splits for the slab to fit `max_slab`, more while the column tiles
// alone leave resident-block slots (sm_count x blocks_per_sm) idle; a warp's
// share is a whole number of `step_k` steps. k >= 1.
inline SplitPlan PlanSplits(int sm_count, int64_t k, int64_t tiles, int step_k, int64_t max_slab,
                            int blocks_per_sm) {
  const int64_t slots = int64_t{std::max(sm_count, 1)} * blocks_per_sm;
  const int64_t unit = int64_t{kWarps} * step_k;  // one step per warp
  const int64_t max_splits = std::max<int64_t>(1, (k + unit - 1) / unit);
  const int64_t fewest = std::min((k + max_slab - 1) / max_slab, max_splits);
  tiles = std::max<int64_t>(tiles, 1);
  // The fewest splits (least partial-sum traffic) whose blocks fill their
  // last wave of resident slots to 90%; else the best filled.
  int64_t splits = fewest;
  double best = -1;
  for (int64_t s = fewest; s <= std::min(max_splits, fewest + 64); ++s) {
    const int64_t blocks = tiles * s;
    const double fill =
        static_cast<double>(blocks) / static_cast<double>((blocks + slots - 1) / slots * slots);
    if (fill > best + 1e-9) best = fill, splits = s;
    if (fill >= 0.9) break;
  }
  SplitPlan p;
  const int64_t per = (k + splits - 1) / splits;
  p.warp_k = ((per + kWarps - 1) / kWarps + step_k - 1) / step_k * step_k;
  p.slab = p.warp_k * kWarps;
  p.splits = (k + p.slab - 1) / p.slab;
  return p;
}

// The float32 [splits, M, N] workspace of the partial sums: none for one
// split (the kernel writes c).
inline size_t SplitWorkspaceBytes(int64_t splits, int64_t m, int64_t n) {
  if (splits <= 1) return 0;
  return static_cast<size_t>(splits) * static_cast<size_t>(m) * static_cast<size_t>(n) *
         sizeof(float);
}

#if defined(__CUDACC__)
// c = alpha * sum over splits of the partials, in split order.
template <typename T>
__global__ void ReduceSplitsKernel(const float* __restrict__ partial, T* __restrict__ c, int64_t mn,
                                   int splits, float alpha) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < mn;
       i += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < splits; ++k) s += partial[k * mn + i];
    c[i] = FromFloat<T>(alpha * s);
  }
}

// c [mn] = alpha * the sum of `splits` float32 partials [splits, mn], on
// `stream`; sm_count sizes the grid.
template <typename T>
cudaError_t ReduceSplits(const float* partial, T* c, int64_t mn, int splits, float alpha,
                         int sm_count, cudaStream_t stream) {
  ReduceSplitsKernel<T>
      <<<GridFor(sm_count, mn, 256), 256, 0, stream>>>(partial, c, mn, splits, alpha);
  return cudaGetLastError();
}
#endif  // __CUDACC__

}  // namespace kerneld::cuda::decode_gemm
