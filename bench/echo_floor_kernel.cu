// echo_floor_kernel.h with CUDA: one stream and device buffer per server
// thread, grown as needed, so concurrent requests do not serialize on a
// lock the way kerneld's worker queue would not either.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "echo_floor_kernel.h"
#include "ops/scale/cuda.cuh"  // kerneld's own scale kernel: the same work

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

ThreadState& State() {
  thread_local ThreadState s;
  return s;
}

// Registered buffers: id -> (opened base, size). A reader lock per request,
// the least a server that lets clients unregister must take.
struct Ipc {
  char* base = nullptr;
  uint64_t size = 0;
};
std::shared_mutex g_ipc_mu;
std::map<std::string, Ipc> g_ipc;
uint64_t g_next_id = 1;
int g_sms = 1;

}  // namespace

std::string FloorOpenIpc(const std::string& handle, uint64_t byte_size, std::string* id) {
  cudaIpcMemHandle_t h;
  if (handle.size() != sizeof h) return "ipc_handle must be 64 bytes";
  std::memcpy(&h, handle.data(), sizeof h);
  void* p = nullptr;
  if (cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess);
      e != cudaSuccess) {
    cudaGetLastError();
    return std::string("cudaIpcOpenMemHandle: ") + cudaGetErrorString(e);
  }
  std::unique_lock lock(g_ipc_mu);
  *id = "floor-" + std::to_string(g_next_id++);
  g_ipc[*id] = Ipc{static_cast<char*>(p), byte_size};
  return "";
}

bool FloorCloseIpc(const std::string& id) {
  std::unique_lock lock(g_ipc_mu);
  auto it = g_ipc.find(id);
  if (it == g_ipc.end()) return false;
  cudaIpcCloseMemHandle(it->second.base);
  g_ipc.erase(it);
  return true;
}

std::string FloorKernelScaleBuffers(const std::string& x_id, uint64_t x_off,
                                    const std::string& y_id, uint64_t y_off, int64_t n, int dtype,
                                    float factor) {
  ThreadState& s = State();
  if (s.stream == nullptr &&
      cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking) != cudaSuccess)
    return "cudaStreamCreate failed";
  const uint64_t item = dtype == 3 ? 4 : 2;
  if (dtype < 1 || dtype > 3) return "the floor scales float16, bfloat16 and float32 only";
  char* x = nullptr;
  char* y = nullptr;
  {
    std::shared_lock lock(g_ipc_mu);
    auto xi = g_ipc.find(x_id), yi = g_ipc.find(y_id);
    if (xi == g_ipc.end() || yi == g_ipc.end()) return "unknown buffer id";
    const uint64_t bytes = static_cast<uint64_t>(n) * item;
    if (x_off + bytes > xi->second.size || y_off + bytes > yi->second.size)
      return "tensor past the end of its buffer";
    x = xi->second.base + x_off;
    y = yi->second.base + y_off;
  }
  namespace sc = kerneld::cuda::scale;
  cudaError_t e =
      dtype == 1   ? sc::Scale<__half>(reinterpret_cast<const __half*>(x),
                                     reinterpret_cast<__half*>(y), n, factor, g_sms, s.stream)
      : dtype == 2 ? sc::Scale<__nv_bfloat16>(reinterpret_cast<const __nv_bfloat16*>(x),
                                              reinterpret_cast<__nv_bfloat16*>(y), n, factor, g_sms,
                                              s.stream)
                   : sc::Scale<float>(reinterpret_cast<const float*>(x),
                                      reinterpret_cast<float*>(y), n, factor, g_sms, s.stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s.stream);
  return e == cudaSuccess ? "" : std::string("scale: ") + cudaGetErrorString(e);
}

std::string FloorKernelInit() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return "--kernel: no CUDA device";
  cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0);
  return cudaFree(nullptr) == cudaSuccess ? "" : "--kernel: cannot create a CUDA context";
}

bool FloorKernelScale(std::string* bytes, bool float32, float factor) {
  ThreadState& s = State();
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
