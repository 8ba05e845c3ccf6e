// echo_floor_kernel.h with CUDA: one stream and device buffer per server
// thread, grown as needed, so concurrent requests do not serialize on a
// lock the way kerneld's worker queue would not either.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "echo_floor_kernel.h"

namespace kerneld::bench {
namespace {

__global__ void ScaleKernel(float* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

struct ThreadState {
  cudaStream_t stream = nullptr;
  void* dev = nullptr;
  size_t capacity = 0;
  ~ThreadState() {
    if (dev != nullptr) cudaFree(dev);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

}  // namespace

std::string FloorKernelInit() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "--kernel: no CUDA device";
  return cudaFree(nullptr) == cudaSuccess ? "" : "--kernel: cannot create a CUDA context";
}

bool FloorKernelScale(std::string* bytes, bool float32, float factor) {
  thread_local ThreadState s;
  if (s.stream == nullptr &&
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess)
    return false;
  if (bytes->size() > s.capacity) {
    if (s.dev != nullptr) cudaFree(s.dev);
    s.dev = nullptr;
    s.capacity = 0;
    if (cudaMalloc(&s.dev, bytes->size()) != cudaSuccess) return false;
    s.capacity = bytes->size();
  }
  if (cudaMemcpyAsync(s.dev, bytes->data(), bytes->size(), cudaMemcpyHostToDevice, s.stream) !=
      cudaSuccess)
    return false;
  if (float32) {
    const int64_t n = static_cast<int64_t>(bytes->size() / sizeof(float));
    const int blocks = static_cast<int>(std::clamp<int64_t>((n + 255) / 256, 1, 1024));
    ScaleKernel<<<blocks, 256, 0, s.stream>>>(static_cast<float*>(s.dev), n, factor);
  }
  if (cudaMemcpyAsync(bytes->data(), s.dev, bytes->size(), cudaMemcpyDeviceToHost, s.stream) !=
      cudaSuccess)
    return false;
  return cudaStreamSynchronize(s.stream) == cudaSuccess;
}

}  // namespace kerneld::bench
