// Internal to the gemm decode kernels (gemm_decode.cu: float32 FMA kernel
// and the dispatch; gemm_decode_mma.cu: the tensor-core kernel for float16 /
// bfloat16): how K is split over blocks, and the split-K reduction.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include "cuda/cuda_check.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda::decode_gemm {

inline constexpr int kWarps = 8;                 // per block; they split the block's slab of K
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kSmemBytes = 64 * 1024;     // the a slab (and the epilogue), FMA kernel
// The tensor-core kernel's: room for a 16-row slab of 2816 k, so that K =
// 4096 takes 2 splits and 16 x 4096 x 4096 is one wave of 256 blocks (two
// an SM, 194 KiB of 228) rather than two waves of 512.
inline constexpr int kMmaSmemBytes = 96 * 1024;

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
SplitPlan PlanSplits(const KernelContext& ctx, int64_t k, int64_t tiles, int step_k, int64_t max_slab,
                     int blocks_per_sm);

// Runs launch(partial): partial is null for one split (the kernel writes c),
// else a float32 [splits, M, N] workspace that is then summed in split
// order, scaled by alpha and rounded into c.
Status RunSplits(const KernelContext& ctx, const SplitPlan& plan, DType dtype, void* c, int64_t m, int64_t n,
                 float alpha, const std::function<Status(float* partial)>& launch);

// The tensor-core kernel (float16 / bfloat16, compute capability >= 8.0).
Status GemmDecodeMma(KernelContext& ctx);

// Opts `kernel` in to `smem_bytes` of dynamic shared memory on `device` (a
// per-device, per-kernel attribute) once, and returns its resident blocks
// per SM. Cached per (kernel, device): the kernels' instantiations share one
// function type, so a cache keyed by the type alone would opt in only the
// first of them and the others would fail to launch (invalid argument).
template <typename Kernel>
Status PrepareKernel(Kernel kernel, int device, int smem_bytes, int* blocks_per_sm) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cached;
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cached.find(key);
  if (it == cached.end()) {
    // The attribute applies to the current device: set it on `device`.
    int current = -1;
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "gemm: cudaGetDevice"));
    if (current != device) KERNELD_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "gemm: cudaSetDevice"));
    int bps = 0;
    const Status opt_in = CudaStatus(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes), "gemm: smem opt-in");
    const Status st =
        opt_in.ok() ? CudaStatus(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, kThreads, smem_bytes),
                                 "gemm: occupancy")
                    : opt_in;
    if (current != device) (void)cudaSetDevice(current);  // best effort: st says what failed
    KERNELD_RETURN_IF_ERROR(st);
    it = cached.emplace(key, std::max(bps, 1)).first;
  }
  *blocks_per_sm = it->second;
  return Status::Ok();
}

}  // namespace kerneld::cuda::decode_gemm
