// The gated activations on CUDA (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul): y = act(gate) * up in
// float32, rounded once; x's rows are [gate (d) | up (d)]. Threads of a
// block split a row (blockDim.x) and a block covers blockDim.y rows, so a
// short d does not leave lanes idle. 128-bit packs when d is a whole number
// of vectors and x, y are 16-byte aligned; else one element at a time.
#pragma once

#include "common/activation_math.h"
#include "common/cuda/cuda_check.cuh"
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
Status Launch(const KernelContext& ctx, const char* name, const T* x, T* y, int64_t rows, int64_t d,
              Act act) {
  const int64_t units = d / N;
  // 256 threads: a power of two up to 256 across the row, the rest across rows.
  int tpr = 1;
  while (tpr < 256 && tpr < units) tpr *= 2;
  const int rpb = 256 / tpr;
  const int64_t blocks = (rows + rpb - 1) / rpb;
  const auto grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 30));
  ActAndMulKernel<T, N, Act>
      <<<grid, dim3(static_cast<unsigned>(tpr), static_cast<unsigned>(rpb)), 0, StreamOf(ctx)>>>(
          x, y, rows, units, act);
  return CheckLaunch(name);
}

template <typename Act>
Status ActAndMul(KernelContext& ctx, const char* name, Act act) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const int64_t d = y.dim(-1);
  if (y.numel() == 0) return Status::Ok();
  const int64_t rows = y.numel() / d;
  return DispatchFloatingCuda(x.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    if (VectorRowsOk<T>(d, {xp, yp})) return Launch<T, kVecN<T>>(ctx, name, xp, yp, rows, d, act);
    return Launch<T, 1>(ctx, name, xp, yp, rows, d, act);
  });
}

}  // namespace kerneld::cuda
