// TimeOnCuda: kernel_bench's method (kerneld/gpu_timing.h) on one of the
// daemon's GPUs, on a stream and memory of the sweep's own: the inputs
// copied to the device, the outputs laid out by the schema
// (kerneld/call.h), then per candidate three warm-up runs and the median of
// `repeats` runs timed with CUDA events, each after an L2 read-flush.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kerneld/call.h"
#include "kerneld/gpu_timing.h"
#include "scheduler/tune_timing.h"

namespace kerneld::server {

namespace {

std::string Err(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// The sweep's stream and device memory, freed on every path.
struct CudaScope {
  cudaStream_t stream = nullptr;
  std::vector<void*> allocs;
  ~CudaScope() {
    if (stream != nullptr) cudaStreamSynchronize(stream);
    for (void* p : allocs) cudaFree(p);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  void* Alloc(int64_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 1))) != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      return nullptr;
    }
    allocs.push_back(p);
    return p;
  }
};

}  // namespace

Status TimeOnCuda(const DeviceInfo& gpu, const TuneProblemSpec& p, TuneTiming* out) {
  const OpDef& op = *p.op;
  const std::string where = gpu.device.ToString();
  if (cudaError_t e = cudaSetDevice(gpu.device.index); e != cudaSuccess)
    return Internal(where + ": " + Err(e));
  CudaScope scope;
  if (cudaError_t e = cudaStreamCreateWithFlags(&scope.stream, cudaStreamNonBlocking);
      e != cudaSuccess)
    return Internal(where + ": " + Err(e));
  KernelContext ctx;
  ctx.device = gpu;
  ctx.stream = scope.stream;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const TuneInput& in = p.inputs[i];
    TensorView v;
    v.device = gpu.device;
    v.dtype = in.dtype;
    v.shape = in.shape;
    const std::string bytes = in.values != nullptr
                                  ? Encode(in.dtype, in.values->values)
                                  : UniformBytes(in.dtype, v.numel(), p.seed + i, p.lo, p.hi);
    v.data = scope.Alloc(static_cast<int64_t>(bytes.size()));
    if (v.data == nullptr)
      return ResourceExhausted(where + ": no device memory for input '" + op.inputs[i].name + "'");
    if (cudaError_t e = cudaMemcpy(v.data, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
        e != cudaSuccess)
      return Internal(where + ": copying inputs: " + Err(e));
    ctx.inputs.push_back(v);
  }
  bool no_memory = false;
  Status prepared = PrepareCall(
      op, p.attrs, "",
      [&](const OutputSpec&, int64_t n) {
        void* ptr = scope.Alloc(n);
        no_memory |= ptr == nullptr;
        return ptr;
      },
      &ctx);
  if (no_memory) return ResourceExhausted(where + ": no device memory for the outputs");
  KERNELD_RETURN_IF_ERROR(prepared);
  out->bucket = BucketOf(op, ctx);
  L2ReadFlush flush;
  KERNELD_RETURN_IF_ERROR(flush.Init());
  for (const ImplDef* impl : TuneCandidates(op, ctx, gpu)) {
    ImplTiming t;
    t.impl = impl;
    if (impl->thread_warm_up) impl->thread_warm_up(gpu);  // cuBLASLt's handle, once a thread
    double us = 0;
    if (Status st = FlushedMedianUs(
            scope.stream, p.repeats, flush, [&] { return impl->fn(ctx); }, &us);
        !st.ok()) {
      t.error = st.message();
      cudaStreamSynchronize(scope.stream);
      cudaGetLastError();
    } else {
      t.median_ns = std::max<int64_t>(1, static_cast<int64_t>(us * 1e3 + 0.5));
    }
    out->impls.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace kerneld::server
