// The gated activations on CUDA (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul): y = act(gate) * up in float32, rounded once; x's rows
// are [gate (d) | up (d)]. Threads of a block split a row (blockDim.x) and a
// block covers blockDim.y rows, so a short d does not leave lanes idle.
// 128-bit packs when d is a whole number of vectors and x, y are 16-byte
// aligned; else one element at a time.
//
// Framework-agnostic: each op's cuda.cuh names its activation and calls
// ActAndMul; act_and_mul_binding.cuh adapts the KernelContext.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/activation_math.h"
#include "common/cuda/rows.cuh"

namespace kerneld::cuda {

// y never overlaps x (the output is half x's size and the server rejects
// overlapping outputs), so both are __restrict__.
template <typename T, int N, typename Act>
__global__ void __launch_bounds__(256) ActAndMulKernel(const T* __restrict__ x, T* __restrict__ y,
                                                       int64_t rows, int64_t units, Act act) {
  using P = Pack<T, N>;
  for (int64_t row = int64_t{blockIdx.x} * blockDim.y + threadIdx.y; row < rows;
       row += int64_t{gridDim.x} * blockDim.y) {
    const P* gate = reinterpret_cast<const P*>(x) + row * 2 * units;
    const P* up = gate + units;
    P* out = reinterpret_cast<P*>(y) + row * units;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      const P g = gate[u];
      const P v = up[u];
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j) o.v[j] = FromFloat<T>(act(ToFloat(g.v[j])) * ToFloat(v.v[j]));
      out[u] = o;
    }
  }
}

template <typename T, int N, typename Act>
cudaError_t LaunchActAndMul(const T* x, T* y, int64_t rows, int64_t d, Act act,
                            cudaStream_t stream) {
  const int64_t units = d / N;
  // 256 threads: a power of two up to 256 across the row, the rest across rows.
  int tpr = 1;
  while (tpr < 256 && tpr < units) tpr *= 2;
  const int rpb = 256 / tpr;
  const int64_t blocks = (rows + rpb - 1) / rpb;
  const auto grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 30));
  ActAndMulKernel<T, N, Act>
      <<<grid, dim3(static_cast<unsigned>(tpr), static_cast<unsigned>(rpb)), 0, stream>>>(
          x, y, rows, units, act);
  return cudaGetLastError();
}

// y [rows, d] = act(x[:, :d]) * x[:, d:] for x [rows, 2d], on `stream`.
template <typename T, typename Act>
cudaError_t ActAndMul(const T* x, T* y, int64_t rows, int64_t d, Act act, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(d, {x, y})) return LaunchActAndMul<T, kVecN<T>>(x, y, rows, d, act, stream);
  return LaunchActAndMul<T, 1>(x, y, rows, d, act, stream);
}

}  // namespace kerneld::cuda
