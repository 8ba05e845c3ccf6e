// add, CUDA kernels: y = a + b in float32, rounded once to the dtype.
//
// When a, b and y sit at the same offset within 16 bytes, a scalar head
// brings them to a 16-byte boundary and the bulk moves as 128-bit vectors
// (grid-stride); the head and the partial-vector tail share one scalar
// launch. Tensors at different offsets take the scalar path throughout.
//
// Framework-agnostic: raw pointers, templated on the element type, the
// launcher returns cudaError_t. The binding (cuda.cu) adapts the
// KernelContext.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"

namespace kerneld::cuda::add {

// y may alias a (in place): no __restrict__; every element is read and then
// written by the same thread.
// Two vectors of each input per thread, all four loads issued before any
// store: more bytes in flight per thread than one vector a loop iteration
// (add on 256M float16: 544 us before, 524 us, torch 531 us; H100 lab).
template <typename T>
__global__ void __launch_bounds__(256)
    AddVecKernel(const Vec16<T>* a, const Vec16<T>* b, Vec16<T>* y, int64_t nvec) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x * 2;
  for (int64_t i0 = blockIdx.x * int64_t{blockDim.x} * 2 + threadIdx.x; i0 < nvec; i0 += stride) {
    const int64_t i1 = i0 + blockDim.x;
    const bool two = i1 < nvec;
    const Vec16<T> va0 = a[i0], vb0 = b[i0];
    Vec16<T> va1, vb1;
    if (two) va1 = a[i1], vb1 = b[i1];
    Vec16<T> o;
#pragma unroll
    for (int k = 0; k < Vec16<T>::kN; ++k)
      o.v[k] = FromFloat<T>(ToFloat(va0.v[k]) + ToFloat(vb0.v[k]));
    y[i0] = o;
    if (two) {
#pragma unroll
      for (int k = 0; k < Vec16<T>::kN; ++k)
        o.v[k] = FromFloat<T>(ToFloat(va1.v[k]) + ToFloat(vb1.v[k]));
      y[i1] = o;
    }
  }
}

// Elements [0, head) and [tail, n), as one index space of head + n - tail.
template <typename T>
__global__ void __launch_bounds__(256)
    AddEdgesKernel(const T* a, const T* b, T* y, int64_t head, int64_t tail, int64_t n) {
  const int64_t count = head + (n - tail);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t e = i < head ? i : tail + (i - head);
    y[e] = FromFloat<T>(ToFloat(a[e]) + ToFloat(b[e]));
  }
}

// y[0, n) = a[0, n) + b[0, n) on `stream`; y may equal a. sm_count sizes the
// scalar launch's grid.
template <typename T>
cudaError_t Add(const T* a, const T* b, T* y, int64_t n, int sm_count, cudaStream_t stream) {
  constexpr int kN = Vec16<T>::kN;
  const auto offset = [](const void* p) { return reinterpret_cast<uintptr_t>(p) & 15u; };
  int64_t head = n;  // no vector part unless the offsets agree
  const uintptr_t off = offset(a);
  if (off == offset(b) && off == offset(y) && off % sizeof(T) == 0)
    head = std::min<int64_t>(n, static_cast<int64_t>((16 - off) % 16 / sizeof(T)));
  const int64_t nvec = (n - head) / kN;
  const int64_t tail = head + nvec * kN;
  if (nvec > 0) {
    AddVecKernel<T><<<GridCovering((nvec + 1) / 2, 256), 256, 0, stream>>>(
        reinterpret_cast<const Vec16<T>*>(a + head), reinterpret_cast<const Vec16<T>*>(b + head),
        reinterpret_cast<Vec16<T>*>(y + head), nvec);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  const int64_t edges = head + (n - tail);
  if (edges > 0) {
    AddEdgesKernel<T><<<GridFor(sm_count, edges, 256), 256, 0, stream>>>(a, b, y, head, tail, n);
    return cudaGetLastError();
  }
  return cudaSuccess;
}

}  // namespace kerneld::cuda::add
