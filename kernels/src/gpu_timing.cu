#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kerneld/gpu_timing.h"

namespace kerneld {

namespace {

// bench_cuda.cuh's ReadKernel: n 16-byte words read with __ldcg.
__global__ void FlushReadKernel(const uint4* p, size_t n, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u) *sink = x;  // keeps the loads
}

Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// Events destroyed on every path.
struct EventPair {
  cudaEvent_t a = nullptr, b = nullptr;
  ~EventPair() {
    if (a != nullptr) cudaEventDestroy(a);
    if (b != nullptr) cudaEventDestroy(b);
  }
};

}  // namespace

L2ReadFlush::~L2ReadFlush() {
  if (buf_ != nullptr) cudaFree(buf_);
  if (sink_ != nullptr) cudaFree(sink_);
}

Status L2ReadFlush::Init() {
  int dev = 0, l2 = 0;
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&dev), "cudaGetDevice"));
  KERNELD_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size"));
  KERNELD_RETURN_IF_ERROR(
      CudaStatus(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev), "SM count"));
  bytes_ = (2 * static_cast<size_t>(std::max(l2, 1 << 20)) + 15) / 16 * 16;
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&buf_, bytes_), "cudaMalloc (L2 flush)"));
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaMemset(buf_, 1, bytes_), "cudaMemset (L2 flush)"));
  return CudaStatus(cudaMalloc(reinterpret_cast<void**>(&sink_), sizeof(unsigned)),
                    "cudaMalloc (L2 flush)");
}

Status L2ReadFlush::Flush(void* stream) const {
  FlushReadKernel<<<4 * sms_, 512, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint4*>(buf_), bytes_ / 16, sink_);
  return CudaStatus(cudaGetLastError(), "L2 flush");
}

Status FlushedMedianUs(void* stream, int reps, const L2ReadFlush& flush,
                       const std::function<Status()>& f, double* us) {
  auto s = static_cast<cudaStream_t>(stream);
  EventPair ev;
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&ev.a), "cudaEventCreate"));
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventCreate(&ev.b), "cudaEventCreate"));
  for (int i = 0; i < 3; ++i) KERNELD_RETURN_IF_ERROR(f());  // warm-up
  KERNELD_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(s), "warm-up"));
  std::vector<float> ms;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    KERNELD_RETURN_IF_ERROR(flush.Flush(stream));
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev.a, s), "cudaEventRecord"));
    KERNELD_RETURN_IF_ERROR(f());
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(ev.b, s), "cudaEventRecord"));
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventSynchronize(ev.b), "timed run"));
    float m = 0;
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&m, ev.a, ev.b), "elapsed"));
    ms.push_back(m);
  }
  std::sort(ms.begin(), ms.end());
  *us = static_cast<double>(ms[ms.size() / 2]) * 1e3;
  return Status::Ok();
}

}  // namespace kerneld
