// add, CUDA kernels: y = a + b in float32, rounded once to the dtype.
//
// When a, b and y sit at the same offset within 16 bytes, a scalar head
// brings them to a 16-byte boundary and the bulk moves as 128-bit vectors
// (one a thread); the head and the partial-vector tail share one scalar
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
// One vector of each input a thread, 256-thread blocks, a grid that covers
// the vectors (the loop runs once; it strides only past 2^31 blocks): scale's
// layout. The plan lab (k17_lab.cu at commit 11d7ce9, `--ops add`; H100, CUDA events, L2
// read-flushed, median of 30; float16 / bfloat16 us) timed it ("t256v1")
// against the former kernel (two vectors a thread, loads first: "current")
// and torch's layouts (128 threads, 1-8 vectors a thread):
//   4096 x 4096:   30.53 / 30.53, the best (former 31.20 / 31.23, torch's
//                  1 vector a thread 30.59 / 30.56);
//   32768 x 8192:  521.50 / 521.60, within 0.2 us of the best (former
//                  524.00 / 524.00);
//   1 x 4096:      3.81 / 3.81, the best (former 3.90 / 3.87);
//   16 x 128256:   7.07 / 7.14, within 1.5% of the best (former 7.04 /
//                  7.01; every variant 6.98-7.33: at 7 us a 0.1 us step).
// torch's own layout (128 threads x 1 vector) ties at mid and large but
// takes 3.94 / 3.84 us at 1 x 4096; the 16 x 128256 winners (512 x 4 for
// float16, 128 x 4 with hints for bfloat16) lose in the other dtype or at
// large. torch eager (bench/peers.py, same pass): 30.88 / 31.09, 521.12 /
// 520.85, 3.94 / 3.94, 7.09 / 7.14 us. float32 was not in the lab.
template <typename T>
__global__ void __launch_bounds__(256)
    AddVecKernel(const Vec16<T>* a, const Vec16<T>* b, Vec16<T>* y, int64_t nvec) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < nvec;
       i += int64_t{gridDim.x} * blockDim.x) {
    const Vec16<T> va = a[i], vb = b[i];
    Vec16<T> o;
#pragma unroll
    for (int k = 0; k < Vec16<T>::kN; ++k)
      o.v[k] = FromFloat<T>(ToFloat(va.v[k]) + ToFloat(vb.v[k]));
    y[i] = o;
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
    AddVecKernel<T><<<GridCovering(nvec, 256), 256, 0, stream>>>(
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
