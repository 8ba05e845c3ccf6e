// Helpers shared by the CUDA benchmarks (kernel_bench, gemm_decode_lab).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

// A benchmark stops at the first failed CUDA call: its numbers would be wrong.
#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace kerneld::bench {

// Include from one source file per target: the kernel below is defined here.

// Reads n 16-byte words (and nothing else), bypassing L1: the L2 flush that
// leaves no dirty lines behind (a memset flush leaves L2 full of modified
// lines, whose write-back the timed kernel then pays for), and the floor for
// a kernel that must read those bytes.
__global__ void ReadKernel(const uint4* p, size_t n, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the loads
}

// ReadKernel over bytes at p (16-byte multiple) with 4 blocks an SM.
inline void ReadBytes(cudaStream_t s, const void* p, size_t bytes, int sms, unsigned* sink) {
  ReadKernel<<<4 * sms, 512, 0, s>>>(static_cast<const uint4*>(p), bytes / 16, sink);
  CK(cudaGetLastError());
}

// What an L2 read-flush reads (ReadBytes): a buffer larger than L2.
struct L2Flush {
  const void* buf = nullptr;
  size_t bytes = 0;
  int sms = 1;
  unsigned* sink = nullptr;
};

// The median of `reps` runs of f() on s, in microseconds (CUDA events),
// each after an L2 read-flush; three runs first as warm-up. The labs'
// method, which is kernel_bench's.
template <typename F>
double FlushedMedianUs(cudaStream_t s, int reps, const L2Flush& flush, F&& f) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  CK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    ReadBytes(s, flush.buf, flush.bytes, flush.sms, flush.sink);
    CK(cudaEventRecord(a, s));
    f();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float m;
    CK(cudaEventElapsedTime(&m, a, b));
    ms.push_back(m);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3;
}

// kernel_bench's inputs, for a peer that must time the same data: a
// splitmix64 hash of (index, seed).
__device__ inline uint32_t Hash(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

// Uniform in [lo, hi) (kernel_bench's Fill for a float input).
template <typename T>
__global__ void FillUniform(T* p, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<T>(lo + (hi - lo) * (Hash(i, seed) >> 8) * (1.0f / 16777216.0f));
}

// i % mod through the hash (kernel_bench's Fill for an int32 input).
__global__ void FillIndex(int32_t* p, int64_t n, uint32_t seed, int64_t mod) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<int32_t>(Hash(i, seed) % mod);
}

}  // namespace kerneld::bench
