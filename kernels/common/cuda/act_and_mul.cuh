// The gated activations on CUDA (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul): y = act(gate) * up in float32, rounded once; x's rows
// are [gate (d) | up (d)]. 128-bit packs when d is a whole number of vectors
// and x, y are 16-byte aligned; else one element at a time.
//
// The plan gives every thread one pack (add's and scale's layout, which run
// at copy speed at every shape): threads of a block split a row
// (blockDim.x, up to 256) and a block covers blockDim.y rows, so a short d
// does not leave lanes idle; a row wider than a block is split over
// gridDim.y blocks (blockIdx.y is the chunk of the row). Nothing depends
// along the row, so a few wide rows (decode of a gated MLP: [T, 2 x 28672]
// at T = 1-64) spread over every SM instead of one block a row, which left
// most SMs idle (16 x 2 x 16384 float16: 0.39 x copy, H100, 2026-11-26).
//
// Framework-agnostic: each op's cuda.cuh names its activation and calls
// ActAndMul; act_and_mul_binding.cuh adapts the KernelContext. The kernel
// is device code that NVRTC can compile; the plan and the launchers are
// host code, kept out of NVRTC's view.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/activation_math.h"
#include "common/cuda/rows.cuh"
#include "common/cuda/width.cuh"

namespace kerneld::cuda {

// y never overlaps x (the output is half x's size and the server rejects
// overlapping outputs), so both are __restrict__. `units` is d in packs of
// N. Rows stride over gridDim.x * blockDim.y, a row's packs over
// gridDim.y * blockDim.x: with the plan's grid each loop runs once, and
// only a grid clamped to the hardware's limits makes a thread loop.
template <typename T, int N, typename Act, int64_t kUnits = 0>
__global__ void __launch_bounds__(256) ActAndMulKernel(const T* __restrict__ x, T* __restrict__ y,
                                                       int64_t rows, int64_t units, Act act) {
  units = Width<kUnits>(units);
  using P = Pack<T, N>;
  // Below 2^24 (gridDim.y <= 65535, the hardware's limit; blockDim.x <= 256):
  // 32-bit, fewer registers.
  const unsigned u0 = blockIdx.y * blockDim.x + threadIdx.x;
  const unsigned u_stride = gridDim.y * blockDim.x;
  for (int64_t row = int64_t{blockIdx.x} * blockDim.y + threadIdx.y; row < rows;
       row += int64_t{gridDim.x} * blockDim.y) {
    const P* gate = reinterpret_cast<const P*>(x) + row * 2 * units;
    const P* up = gate + units;
    P* out = reinterpret_cast<P*>(y) + row * units;
    // Not unrolled: under the plan it runs once, and unrolled copies cost
    // registers (silu float32 on sm_90: 31 -> 44 a thread, fewer blocks an SM).
#pragma unroll 1
    for (int64_t u = u0; u < units; u += u_stride) {
      const P g = gate[u];
      const P v = up[u];
      P o;
#pragma unroll
      for (int j = 0; j < N; ++j) o.v[j] = FromFloat<T>(act(ToFloat(g.v[j])) * ToFloat(v.v[j]));
      out[u] = o;
    }
  }
}

#ifndef __CUDACC_RTC__  // the plan and the launchers: host code, which NVRTC does not compile
// The launch shape of ActAndMulKernel for `rows` rows of `units` packs.
struct ActAndMulPlan {
  dim3 grid;
  dim3 block;
};

// 256 threads: a power of two up to 256 across the row, the rest across
// rows (blockDim.y rows a block); one pack a thread, so a row wider than
// 256 packs takes ceil(units / 256) blocks side by side (grid.y) and the
// grid covers rows x units whatever their ratio. Looping over packs instead
// (the former plan: one block a row, the block walking the row) kept one
// load in flight per thread per iteration and few blocks at few rows.
// grid.x stays within 2^30 and grid.y within 65535 (the hardware's limit
// on y); past them the kernel's loops take the rest.
inline ActAndMulPlan PlanActAndMul(int64_t rows, int64_t units) {
  int tpr = 1;
  while (tpr < 256 && tpr < units) tpr *= 2;
  const int rpb = 256 / tpr;
  const int64_t row_blocks = (rows + rpb - 1) / rpb;
  const int64_t chunks = (units + tpr - 1) / tpr;
  ActAndMulPlan p;
  p.block = dim3(static_cast<unsigned>(tpr), static_cast<unsigned>(rpb));
  p.grid = dim3(static_cast<unsigned>(std::clamp<int64_t>(row_blocks, 1, int64_t{1} << 30)),
                static_cast<unsigned>(std::clamp<int64_t>(chunks, 1, 65535)));
  return p;
}

template <typename T, int N, typename Act>
cudaError_t LaunchActAndMul(const T* x, T* y, int64_t rows, int64_t d, Act act,
                            cudaStream_t stream) {
  const int64_t units = d / N;
  const ActAndMulPlan p = PlanActAndMul(rows, units);
  ActAndMulKernel<T, N, Act><<<p.grid, p.block, 0, stream>>>(x, y, rows, units, act);
  return cudaGetLastError();
}

// y [rows, d] = act(x[:, :d]) * x[:, d:] for x [rows, 2d], on `stream`.
template <typename T, typename Act>
cudaError_t ActAndMul(const T* x, T* y, int64_t rows, int64_t d, Act act, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  if (VectorRowsOk<T>(d, {x, y})) return LaunchActAndMul<T, kVecN<T>>(x, y, rows, d, act, stream);
  return LaunchActAndMul<T, 1>(x, y, rows, d, act, stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda
