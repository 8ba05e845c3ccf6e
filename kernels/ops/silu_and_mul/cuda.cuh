// silu_and_mul, CUDA: y = silu(gate) * up in float32, rounded once, for x's rows
// [gate (d) | up (d)]. The kernel is common/cuda/act_and_mul.cuh's;
// framework-agnostic: raw pointers, the launcher returns cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/activation_math.h"
#include "common/cuda/act_and_mul.cuh"

namespace kerneld::cuda::silu_and_mul {

#ifndef __CUDACC_RTC__  // the launcher: host code, which NVRTC does not compile
// y [rows, d] from x [rows, 2d] on `stream`.
template <typename T>
cudaError_t SiluAndMul(const T* x, T* y, int64_t rows, int64_t d, cudaStream_t stream) {
  return ActAndMul(x, y, rows, d, act::Silu{}, stream);
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda::silu_and_mul
