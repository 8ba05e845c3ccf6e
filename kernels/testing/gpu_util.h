// GPU test helpers: run an op's CUDA implementation on host tensors through
// the one harness (op_runner.h, RunOp; copied to device memory, outputs
// poisoned with 0xff = NaN), and a main() that
// skips the whole binary (exit 77, ctest SKIP_RETURN_CODE) when no GPU is
// present, with a message saying so.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "op_runner.h"

namespace kerneld::testing {

inline bool HaveGpu(std::string* why = nullptr) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    cudaGetLastError();
    return false;
  }
  return true;
}

inline DeviceInfo GpuInfo(int dev = 0) {
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, dev);
  DeviceInfo d;
  d.device = Device::Cuda(dev);
  d.name = p.name;
  d.compute_capability = p.major * 10 + p.minor;
  d.sm_count = p.multiProcessorCount;
  d.total_memory = static_cast<int64_t>(p.totalGlobalMem);
  d.l2_bytes = p.l2CacheSize;
  return d;
}

// A GPU's memory and a stream of its own for RunOp (device `info`, by
// default device 0 as it is). `misalign` shifts every tensor by that many
// bytes from a 256-byte boundary. `defer_checks`: the impl leaves its
// after-the-stream checks to RunOp, which runs them after its own wait, as
// the daemon's worker does (KernelContext::defer_checks); false, the impl
// waits for them itself, as for a caller that never looks.
class CudaTarget : public RunTarget {
 public:
  explicit CudaTarget(size_t misalign = 0, DeviceInfo info = GpuInfo(), bool defer_checks = true)
      : misalign_(misalign), info_(std::move(info)), defer_checks_(defer_checks) {
    cudaSetDevice(info_.device.index);
    cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  }
  ~CudaTarget() override {
    for (void* p : allocs_) cudaFree(p);
    cudaStreamDestroy(stream_);
  }
  void Bind(KernelContext* ctx) override {
    ctx->device = info_;
    ctx->stream = stream_;
    ctx->defer_checks = defer_checks_;
  }
  void* Alloc(size_t bytes, DType, const std::string* init) override {
    void* p = nullptr;
    cudaMalloc(&p, bytes + 512);
    allocs_.push_back(p);
    char* d = static_cast<char*>(p) + misalign_;
    if (init != nullptr)
      cudaMemcpy(d, init->data(), bytes, cudaMemcpyHostToDevice);
    else
      cudaMemset(d, 0xff, bytes);  // NaN
    return d;
  }
  Status Finish() override {
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
      return Internal(std::string("cuda: ") + cudaGetErrorString(e));
    return Status::Ok();
  }
  std::string Read(const TensorView& v) override {
    std::string bytes(static_cast<size_t>(v.nbytes()), '\0');
    cudaMemcpy(bytes.data(), v.raw(), bytes.size(), cudaMemcpyDeviceToHost);
    return bytes;
  }

 private:
  size_t misalign_;
  DeviceInfo info_;
  bool defer_checks_;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocs_;
};

// RunOp with `backend`'s CUDA implementation on device 0.
inline OpRun RunOnCuda(const std::string& op_name, const HostTensors& inputs, const AttrMap& attrs,
                       const std::string& backend = "cuda", const std::string& alias = "",
                       size_t misalign = 0, bool defer_checks = true) {
  CudaTarget gpu(misalign, GpuInfo(), defer_checks);
  return RunOp(op_name, backend, inputs, attrs, gpu, alias);
}

}  // namespace kerneld::testing

// Use in one .cc/.cu per gpu test binary: KERNELD_GPU_TEST_MAIN()
#define KERNELD_GPU_TEST_MAIN()                                           \
  int main(int argc, char** argv) {                                       \
    std::string why;                                                      \
    if (!kerneld::testing::HaveGpu(&why)) {                               \
      std::printf("SKIPPED: no GPU on this machine (%s)\n", why.c_str()); \
      return 77;                                                          \
    }                                                                     \
    ::testing::InitGoogleTest(&argc, argv);                               \
    return RUN_ALL_TESTS();                                               \
  }
