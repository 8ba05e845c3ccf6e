// merge_state on CUDA: one warp per (row, head); lane 0 reads the two lse,
// the warp mixes the head_dim elements in float32, then lane 0 writes s
// (after the warp has read s_a: s may be s_a). v may be v_a: each element
// is read and written by one lane.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/vec.cuh"

namespace kerneld::cuda::merge {

template <typename T>
__global__ void MergeStateKernel(const T* va, const float* sa, const T* vb, const float* sb, T* v,
                                 float* s, int64_t rows, int64_t d) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t{gridDim.x} * (blockDim.x / 32);
  for (int64_t r = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
    const float a = sa[r], b = sb[r], m = fmaxf(a, b);
    float wa = 0, wb = 0, out = -INFINITY;
    if (m != -INFINITY) {
      wa = __expf(a - m);
      wb = __expf(b - m);
      const float sum = wa + wb;
      out = m + __logf(sum);
      wa /= sum;
      wb /= sum;
    }
    for (int64_t e = lane; e < d; e += 32)
      v[r * d + e] = FromFloat<T>(wa * ToFloat(va[r * d + e]) + wb * ToFloat(vb[r * d + e]));
    __syncwarp();
    if (lane == 0) s[r] = out;
  }
}

#ifndef __CUDACC_RTC__

template <typename T>
cudaError_t MergeState(const T* va, const float* sa, const T* vb, const float* sb, T* v, float* s,
                       int64_t rows, int64_t d, int sm_count, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  int64_t blocks = (rows + 7) / 8;
  if (blocks > 16 * int64_t{sm_count}) blocks = 16 * int64_t{sm_count};
  MergeStateKernel<T>
      <<<static_cast<unsigned>(blocks), 256, 0, stream>>>(va, sa, vb, sb, v, s, rows, d);
  return cudaGetLastError();
}

#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::merge
