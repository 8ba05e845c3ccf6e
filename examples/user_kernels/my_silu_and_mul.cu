// A user kernel for kerneld (docs/user-kernels.md, the walk-through):
// y = silu(gate) * up over x = [gate | up] per row, one fused pass, for
// float32, float16 and bfloat16 (the template's T). Registered with
// my_silu_and_mul.json and checked and timed against the built-in
// silu_and_mul:
//
//   kernelctl kernel register examples/user_kernels/my_silu_and_mul.cu \
//       --spec examples/user_kernels/my_silu_and_mul.json
//   kernelctl kernel eval my_silu_and_mul --against silu_and_mul \
//       --shapes x=64x8192 --dtype bfloat16
//
// The parameters are the spec's, in order: the input, the output, then the
// shape symbols (rows, d) as int64_t.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cuda/std/cstdint>

template <typename T>
__global__ void my_silu_and_mul(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                int64_t d) {
  const int64_t row = blockIdx.y;
  const int64_t col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (row >= rows || col >= d) return;
  const float gate = static_cast<float>(x[row * 2 * d + col]);
  const float up = static_cast<float>(x[row * 2 * d + d + col]);
  // silu in float32, as the built-in computes it, rounded once to T.
  y[row * d + col] = static_cast<T>(gate / (1.0f + __expf(-gate)) * up);
}
