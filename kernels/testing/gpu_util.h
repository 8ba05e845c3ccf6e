// GPU test helpers: run an op's CUDA implementation on host tensors (copied
// to device memory, outputs poisoned with 0xff = NaN), and a main() that
// skips the whole binary (exit 77, ctest SKIP_RETURN_CODE) when no GPU is
// present, with a message saying so.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

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

// Like RunOnCpu, but with `backend`'s CUDA implementation on device 0.
// `misalign` shifts every tensor by that many bytes from a 256-byte boundary.
inline OpRun RunOnCuda(const std::string& op_name, const HostTensors& inputs, const AttrMap& attrs,
                       const std::string& backend = "cuda", const std::string& alias = "",
                       size_t misalign = 0) {
  OpRun r;
  const OpDef* op = OpRegistry::Global().Find(op_name);
  if (!op) return {NotFound("no op " + op_name), {}};
  const ImplDef* impl = op->FindImpl(backend);
  if (!impl) return {NotFound(op_name + " has no " + backend + " impl"), {}};
  KernelContext ctx;
  ctx.device = GpuInfo();
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  ctx.stream = stream;
  r.status = PrepareAttrs(*op, attrs, &ctx);
  if (!r.status.ok()) return r;
  std::vector<void*> allocs;
  auto dev_alloc = [&](size_t n) {
    void* p = nullptr;
    cudaMalloc(&p, n + 512);
    allocs.push_back(p);
    return static_cast<char*>(p) + misalign;
  };
  ctx.inputs.resize(op->inputs.size());
  for (size_t i = 0; i < op->inputs.size(); ++i) {
    auto it = inputs.find(op->inputs[i].name);
    if (it == inputs.end()) continue;
    std::string bytes = Encode(it->second.dtype, it->second.values);
    char* d = dev_alloc(bytes.size());
    cudaMemcpy(d, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
    TensorView& v = ctx.inputs[i];
    v.data = d;
    v.device = ctx.device.device;
    v.dtype = it->second.dtype;
    v.shape = it->second.shape;
  }
  std::vector<OutputSpec> specs;
  r.status = PrepareInputs(ctx, &specs);
  if (r.status.ok())
    r.status = LayOutOutputs(
        specs, alias,
        [&](const OutputSpec&, int64_t bytes) {
          void* p = dev_alloc(static_cast<size_t>(bytes));
          cudaMemset(p, 0xff, static_cast<size_t>(bytes));
          return p;
        },
        &ctx);
  if (r.status.ok()) {
    r.status = Call(*impl, ctx);
    cudaError_t e = cudaStreamSynchronize(stream);
    if (r.status.ok() && e != cudaSuccess)
      r.status = Internal(std::string("cuda: ") + cudaGetErrorString(e));
  }
  if (r.status.ok()) {
    for (size_t i = 0; i < op->outputs.size(); ++i) {
      const TensorView& v = ctx.outputs[i];
      std::string bytes(static_cast<size_t>(v.nbytes()), '\0');
      cudaMemcpy(bytes.data(), v.raw(), bytes.size(), cudaMemcpyDeviceToHost);
      HostTensor t;
      t.dtype = v.dtype;
      t.shape = v.shape;
      Decode(v.dtype, bytes, &t.values);
      r.outputs[op->outputs[i].name] = std::move(t);
    }
  }
  for (void* p : allocs) cudaFree(p);
  cudaStreamDestroy(stream);
  return r;
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
