// Internal to the gemm decode kernels (cuda.cu: float32 FMA kernel
// and the dispatch; gemm_decode_mma.cu: the tensor-core kernel for float16 /
// bfloat16): how K is split over blocks, and the split-K reduction.
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

namespace kerneld::cuda::decode_gemm {

inline constexpr int kWarps = 8;  // per block; they split the block's slab of K
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kSmemBytes = 64 * 1024;  // the a slab (and the epilogue), FMA kernel
// The tensor-core kernel's (clamped to the device's limit: 227 KiB on
// sm_90, 163 KiB on sm_80, 99 KiB on sm_86/89): a 16-row slab of up to 6144
// k, so that K = 4096 needs no split. Measured on the H100 at 16 x 4096 x
// 4096: two splits (a second kernel sums them) took 22.8 + 3.6 us of GPU
// time and 34 us a call.
inline constexpr int kMmaSmemBytes = 200 * 1024;

// A block's share of K: `slab` columns of a (in shared memory), `warp_k` of
// them per warp; `splits` blocks along K per column tile.
struct SplitPlan {
  int64_t splits = 1;
  int64_t warp_k = 0;
  int64_t slab = 0;
};

// Enough splits for the slab to fit `max_slab`, more while the column tiles
// alone leave resident-block slots idle; a warp's share is a whole number of
// `step_k` steps.
SplitPlan PlanSplits(const KernelContext& ctx, int64_t k, int64_t tiles, int step_k,
                     int64_t max_slab, int blocks_per_sm);

// Runs launch(partial): partial is null for one split (the kernel writes c),
// else a float32 [splits, M, N] workspace that is then summed in split
// order, scaled by alpha and rounded into c.
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

}  // namespace kerneld::cuda::decode_gemm
