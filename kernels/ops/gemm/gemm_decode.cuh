// Internal to the gemm decode kernels' bindings (cuda.cu: the FMA kernel,
// the chooser and the split-K workspace; gemm_decode_mma.cu and
// gemm_decode_pipe.cu: the tensor-core kernels): what needs the framework
// or per-process state. The kernels and their launch math are in the
// framework-agnostic headers (cuda.cuh, gemm_decode_mma.cuh,
// gemm_decode_pipe.cuh, gemm_decode_splits.cuh).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"
#include "ops/gemm/gemm_decode_splits.cuh"

namespace kerneld::cuda::decode_gemm {

// Runs launch(partial): partial is null for one split (the kernel writes c),
// else a float32 [splits, M, N] workspace from a per-device pool that is
// then summed in split order, scaled by alpha and rounded into c
// (ReduceSplits).
Status RunSplits(const KernelContext& ctx, const SplitPlan& plan, DType dtype, void* c, int64_t m,
                 int64_t n, float alpha, const std::function<Status(float* partial)>& launch);

// The tensor-core kernels (float16 / bfloat16, compute capability >= 8.0):
// the pipelined one (gemm_decode_pipe.cu) and the register-window one
// (gemm_decode_mma.cu). ChooseDecodeKernel (cuda.cu) picks between them and
// the FMA kernel.
Status GemmDecodeMma(KernelContext& ctx);
bool PipeEligible(KernelContext& ctx);
// Sets *launched to false, launching nothing, when no configuration fits.
Status GemmDecodePipe(KernelContext& ctx, bool* launched);
// For tests: whether two K splits may be summed in a cluster (default true;
// false takes the workspace path), and how many cluster launches were made.
void SetPairClustersForTesting(bool enabled);
int64_t PairClusterLaunchesForTesting();

// Opts `kernel` in to `want_smem` bytes of dynamic shared memory on
// `device` (a per-device, per-kernel attribute), or to the device's
// per-block limit where that is less (*smem_bytes says which), once, and
// returns its resident blocks per SM with that much. Cached per (kernel,
// device): the kernels' instantiations share one function type, so a cache
// keyed by the type alone would opt in only the first of them and the
// others would fail to launch (invalid argument). `probe`, if given, is a
// further per-(kernel, device) question asked in the same once (with
// `device` current and the opt-in done); its answer comes back in *probed.
template <typename Kernel>
Status PrepareKernel(Kernel kernel, int device, int want_smem, int* blocks_per_sm, int* smem_bytes,
                     bool (*probe)(Kernel kernel, int smem) = nullptr, bool* probed = nullptr) {
  struct Prepared {
    int blocks, smem;
    bool probed;
  };
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, Prepared> cached;
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cached.find(key);
  if (it == cached.end()) {
    int limit = 0;
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                   "gemm: shared memory limit"));
    const int smem = std::min(want_smem, limit);
    // The attribute applies to the current device: set it on `device`.
    int current = -1;
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "gemm: cudaGetDevice"));
    if (current != device)
      KERNELD_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "gemm: cudaSetDevice"));
    int bps = 0;
    const Status opt_in =
        CudaStatus(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                   "gemm: smem opt-in");
    const Status st = opt_in.ok() ? CudaStatus(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                                                   &bps, kernel, kThreads, smem),
                                               "gemm: occupancy")
                                  : opt_in;
    const bool answer = st.ok() && probe != nullptr && probe(kernel, smem);
    if (current != device) (void)cudaSetDevice(current);  // best effort: st says what failed
    KERNELD_RETURN_IF_ERROR(st);
    it = cached.emplace(key, Prepared{std::max(bps, 1), smem, answer}).first;
  }
  *blocks_per_sm = it->second.blocks;
  *smem_bytes = it->second.smem;
  if (probed != nullptr) *probed = it->second.probed;
  return Status::Ok();
}

// PrepareKernel on `device` as the `prepare` of the framework-agnostic
// planners (PlanGemmDecodeFma, PlanGemmDecodeMma): its Status, message
// included, goes to *status, and the planner is told cudaErrorUnknown on a
// failure (it passes that through; PlanStatus then returns *status).
struct PrepareOn {
  int device;
  Status* status;
  template <typename Kernel>
  cudaError_t operator()(Kernel kernel, int want_smem, int* blocks_per_sm, int* smem_bytes) const {
    (void)(*status = PrepareKernel(kernel, device, want_smem, blocks_per_sm, smem_bytes));
    return status->ok() ? cudaSuccess : cudaErrorUnknown;
  }
};

// The Status of a planner's answer: PrepareKernel's failure as it was, the
// planner's refusal of a shape too large for the grid as InvalidArgument
// (the binding has already refused empty shapes, M > 32 and compute
// capability < 8.0 for the tensor-core kernel, so no other refusal
// reaches here), anything else as the CUDA error.
inline Status PlanStatus(cudaError_t err, const Status& setup) {
  if (!setup.ok()) return setup;
  if (err == cudaErrorInvalidValue)
    return InvalidArgument("gemm: shape too large for the decode kernel (use backend cublas)");
  return CudaStatus(err, "gemm");
}

}  // namespace kerneld::cuda::decode_gemm
