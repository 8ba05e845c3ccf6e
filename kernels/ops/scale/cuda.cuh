// scale, CUDA kernels: y = x * factor in float32, rounded once to T.
// Framework-agnostic (FlashInfer's norm.cuh shape): raw pointers, templated
// on the element type, the launcher returns cudaError_t. The binding
// (cuda.cu) adapts the KernelContext; a JIT backend can compile this header.
//
// The vector path moves 16 bytes per thread per iteration (grid-stride);
// the head/tail that breaks 16-byte alignment or a partial vector runs the
// scalar path, so every size and offset is correct.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"

namespace kerneld::cuda::scale {

template <typename T>
__global__ void ScaleVecKernel(const Vec16<T>* __restrict__ x, Vec16<T>* __restrict__ y,
                               int64_t nvec, float f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec;
       i += int64_t{gridDim.x} * blockDim.x) {
    Vec16<T> v = x[i];
#pragma unroll
    for (int k = 0; k < Vec16<T>::kN; ++k) v.v[k] = FromFloat<T>(ToFloat(v.v[k]) * f);
    y[i] = v;
  }
}

template <typename T>
__global__ void ScaleScalarKernel(const T* x, T* y, int64_t n, float f) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = FromFloat<T>(ToFloat(x[i]) * f);
}

// y[0, n) = x[0, n) * f on `stream`; y may equal x. sm_count sizes the grid.
template <typename T>
cudaError_t Scale(const T* x, T* y, int64_t n, float f, int sm_count, cudaStream_t stream) {
  constexpr int kN = Vec16<T>::kN;
  const bool vec_ok = IsAligned16(x) && IsAligned16(y);
  const int64_t nvec = vec_ok ? n / kN : 0;
  if (nvec > 0) {
    ScaleVecKernel<T><<<GridCovering(nvec, 256), 256, 0, stream>>>(
        reinterpret_cast<const Vec16<T>*>(x), reinterpret_cast<Vec16<T>*>(y), nvec, f);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  const int64_t done = nvec * kN;
  if (done < n) {
    ScaleScalarKernel<T>
        <<<GridFor(sm_count, n - done, 256), 256, 0, stream>>>(x + done, y + done, n - done, f);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace kerneld::cuda::scale
