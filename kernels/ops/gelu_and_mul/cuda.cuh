// gelu_and_mul, CUDA: y = gelu(gate) * up in float32, rounded once, for x's
// rows [gate (d) | up (d)]. The kernel is common/cuda/act_and_mul.cuh's;
// framework-agnostic: raw pointers, the launcher returns cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "common/activation_math.h"
#include "common/cuda/act_and_mul.cuh"

namespace kerneld::cuda::gelu_and_mul {

// The exact GELU for float16 / bfloat16 outputs: 0.5 * a * (1 + erf(a / sqrt(2)))
// with erff, a few times cheaper on the GPU than the erfcf form (which kept
// the kernel below copy bandwidth for half types). Its cancellation for
// very negative a costs float32 relative accuracy only where |gelu(a)|
// < 1e-6, far below a half type's rounding; float32 keeps act::Gelu.
struct GeluErf {
  __device__ __forceinline__ float operator()(float a) const {
    return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
  }
};

#ifndef __CUDACC_RTC__  // the launcher: host code, which NVRTC does not compile
// y [rows, d] from x [rows, 2d] on `stream`.
template <typename T>
cudaError_t GeluAndMul(const T* x, T* y, int64_t rows, int64_t d, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, float>) {
    return ActAndMul(x, y, rows, d, act::Gelu{}, stream);
  } else {
    return ActAndMul(x, y, rows, d, GeluErf{}, stream);
  }
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::gelu_and_mul
