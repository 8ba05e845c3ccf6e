// Block-wide reductions and scans for the one-block-per-row kernels
// (softmax, sampling). Fixed shuffle trees and a fixed thread -> element
// mapping: the same inputs give bit-identical results on every run, which
// sampling's "same seed, same samples" relies on.
//
// All take a 1-D block whose size is a multiple of 32 and a __shared__
// scratch of 32 values; every thread of the block must call them (they
// synchronize), and every thread gets the result.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kerneld::cuda::blockops {

// Butterfly (xor) reductions: floating-point addition is commutative, so
// every lane ends with the same bits.
template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T>
__device__ __forceinline__ T WarpMax(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename T>
__device__ __forceinline__ T WarpMin(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T Warp(T v) const {
    return WarpSum(v);
  }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T Warp(T v) const {
    return WarpMax(v);
  }
};
struct MinOp {
  template <typename T>
  __device__ __forceinline__ T Warp(T v) const {
    return WarpMin(v);
  }
};

// Reduces v over the block with op; `identity` fills the unused lanes of
// the second level.
template <typename T, typename Op>
__device__ __forceinline__ T Reduce(T v, T identity, T* scratch, Op op) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = op.Warp(v);
  if (blockDim.x == 32) return v;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? scratch[lane] : identity;
  v = op.Warp(v);
  __syncthreads();  // scratch is free again
  return v;
}

template <typename T>
__device__ __forceinline__ T Sum(T v, T* scratch) {
  return Reduce(v, T(0), scratch, SumOp{});
}
template <typename T>
__device__ __forceinline__ T Max(T v, T identity, T* scratch) {
  return Reduce(v, identity, scratch, MaxOp{});
}
template <typename T>
__device__ __forceinline__ T Min(T v, T identity, T* scratch) {
  return Reduce(v, identity, scratch, MinOp{});
}

// Exclusive prefix sum of v in thread order; *total gets the block's sum.
template <typename T>
__device__ __forceinline__ T ExclusiveScan(T v, T* scratch, T* total) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  T x = v;  // inclusive scan within the warp (Hillis-Steele)
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= static_cast<unsigned>(o)) x += y;
  }
  T excl = __shfl_up_sync(0xffffffffu, x, 1);
  if (lane == 0) excl = T(0);
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    T w = lane < warps ? scratch[lane] : T(0);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const T y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= static_cast<unsigned>(o)) w += y;
    }
    scratch[lane] = w;  // inclusive sums of the warp totals
  }
  __syncthreads();
  const T before = warp > 0 ? scratch[warp - 1] : T(0);
  *total = scratch[warps - 1];
  __syncthreads();  // scratch is free again
  return before + excl;
}

}  // namespace kerneld::cuda::blockops
