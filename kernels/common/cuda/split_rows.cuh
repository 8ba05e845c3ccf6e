// Split rows for the row-wise norms (rmsnorm, fused_add_rmsnorm, layernorm): at few
// tokens and wide rows one block a row leaves most SMs idle (16 x 32768
// float16 rmsnorm ran at 0.53 x copy on an H100, 1 x 32000 at 0.45), so a
// row is split over the C blocks of a thread-block cluster, as softmax's
// split-row kernel does (ops/softmax/cuda.cuh). Each block caches its chunk
// of the row in registers, sums its squares, and the C partial sums meet
// through distributed shared memory (two cluster barriers); each block then
// writes its chunk. sm_90+ only (clusters); the plan never picks it below.
//
// Device code for the AOT and JIT builds alike; the launch helper is host
// code; the plan is split_row_plan.h.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/split_row_plan.h"

#ifndef __CUDACC_RTC__  // host code: NVRTC compiles device code only
#include <map>
#include <mutex>
#include <tuple>
#endif  // __CUDACC_RTC__

namespace kerneld::cuda {

// Sum of v over every thread of the cluster (a row's blocks); every thread
// gets the total. Every thread of every block of the cluster must call it,
// once per kernel (its barriers are the cluster's). The sum's order is
// fixed (warps, then a block's warps, then the blocks by rank): the same
// input gives the same bits. Below sm_90 it returns v as it came: the
// launchers never run a split-row kernel there.
__device__ __forceinline__ float ClusterRowSum(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float warp_part[32];
  __shared__ float part;   // this block's sum, read by warp 0 of every block
  __shared__ float total;  // the row's, from this block's warp 0
  const cg::cluster_group cluster = cg::this_cluster();
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  v = blockops::WarpSum(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x >> 5) ? warp_part[lane] : 0.0f;
    v = blockops::WarpSum(v);
    if (lane == 0) part = v;
  }
  cluster.sync();   // every block's partial is written
  if (warp == 0) {  // lane r reads rank r's partial
    const unsigned c = cluster.num_blocks();
    float t = lane < c ? *cluster.map_shared_rank(&part, static_cast<int>(lane)) : 0.0f;
    t = blockops::WarpSum(t);
    if (lane == 0) total = t;
  }
  // The total is in `total`, and no block leaves while another still reads
  // its `part`.
  cluster.sync();
  return total;
#else
  return v;
#endif
}

// This block's share of a split row: block `rank` of the row's cluster owns
// packs [u0, u1). rank = blockIdx.x % C (clusters are consecutive blocks
// along x), row = blockIdx.x / C.
struct SplitSlot {
  int64_t row, u0, u1;
  __device__ __forceinline__ SplitSlot(int64_t units, int64_t chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned c = cooperative_groups::this_cluster().num_blocks();
#else
    const unsigned c = 1;
#endif
    row = blockIdx.x / c;
    u0 = int64_t{blockIdx.x % c} * chunk;
    u1 = u0 + chunk < units ? u0 + chunk : units;
  }
};

#ifndef __CUDACC_RTC__  // the launch: host code
// Whether `kernel` runs as clusters of c blocks of `threads` on the current
// device: its code is sm_90+ and cudaOccupancyMaxActiveClusters places at
// least one (opting in to clusters of more than 8 first). Asked once per
// (kernel, device, c, threads).
template <typename Kernel>
bool SplitClustersRun(Kernel kernel, int c, unsigned threads) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, unsigned>, bool> cached;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), device, c, threads);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cached.find(key); it != cached.end()) return it->second;
  bool ok = false;
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.binaryVersion >= 90 &&
      (c <= 8 || cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                     cudaSuccess)) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(c);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(static_cast<unsigned>(c));
    cfg.blockDim = dim3(threads);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0;
  }
  (void)cudaGetLastError();  // a refusal is an answer, not the request's error
  cached.emplace(key, ok);
  return ok;
}

// Launches `kernel` over rows x p.cluster blocks in clusters of p.cluster.
// *launched false (and cudaSuccess): the device refused clusters; the
// caller takes its one-block-a-row plan.
template <typename... KArgs, typename... Args>
cudaError_t LaunchSplitRows(void (*kernel)(KArgs...), const SplitRowPlan& p, int64_t rows,
                            cudaStream_t stream, bool* launched, Args... args) {
  *launched = false;
  if (!SplitClustersRun(kernel, p.cluster, p.threads)) return cudaSuccess;
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(p.cluster);
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.gridDim = dim3(static_cast<unsigned>(rows * p.cluster));
  cfg.blockDim = dim3(p.threads);
  cfg.stream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...) != cudaSuccess) {
    (void)cudaGetLastError();  // refused: the caller's other plan runs
    return cudaSuccess;
  }
  *launched = true;
  g_split_row_launches.fetch_add(1, std::memory_order_relaxed);
  return cudaSuccess;
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda
