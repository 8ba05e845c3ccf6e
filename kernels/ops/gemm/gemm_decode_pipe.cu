// Launcher of the pipelined decode gemm kernel (gemm_decode_pipe.cuh): picks
// the tile shape for the layout, N and the device's shared memory, and the
// split of K.
//
// Tile shapes, from bench/labs/gemm_decode_lab.cu on the H100 (docs/kernels.md
// has the table): for b [N, K] 32 columns a block and chunks of 256 k in 4
// slots; where 32-column tiles would need more than one wave of blocks
// (N = 14336), 64 columns in 3 slots (fewer re-reads of a, which every
// block loads for itself). For b [K, N] 32 columns (64-byte row runs) and
// 64 when wide. A device with less shared memory per block (sm_86/89: 99
// KiB) takes 128-k chunks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/launch.cuh"
#include "kerneld/op.h"
#include "ops/gemm/gemm_decode.cuh"
#include "ops/gemm/gemm_decode_pipe.cuh"

namespace kerneld::cuda::decode_gemm {

namespace {

using decode_pipe::DecodePipeKernel;
using decode_pipe::SmemBytes;

std::atomic<bool> g_pair_clusters{true};
std::atomic<int64_t> g_pair_cluster_launches{0};

// The launch of `grid` as clusters of the two K splits of a column tile
// (the kernel allows up to kMaxClusterSplits; two measured best).
cudaLaunchConfig_t PairClusterConfig(dim3 grid, int smem, cudaStream_t s,
                                     cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(decode_pipe::kThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = s;
  *attr = cudaLaunchAttribute{};
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = 1;
  attr->val.clusterDim.y = 2;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether `kernel` can run as two-block clusters on the current device:
// its code was compiled for sm_90+ (the cluster sum exists only there; a
// build whose sm_90 code is JIT-compiled from older PTX would trap) and the
// device can hold at least one such cluster. Asked once per (kernel,
// device), through PrepareKernel.
template <typename Kernel>
bool PairClustersRun(Kernel kernel, int smem) {
  bool ok = false;
  cudaFuncAttributes fa{};
  if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess && fa.ptxVersion >= 90) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = PairClusterConfig(dim3(1, 2), smem, nullptr, &attr);
    int clusters = 0;
    ok = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) == cudaSuccess && clusters > 0;
  }
  (void)cudaGetLastError();  // a refusal above is an answer, not a request's error
  return ok;
}

// Launches one tile configuration, or returns false in *fits (launching
// nothing) when its shared memory exceeds the device's per-block limit or,
// unless last_resort, it needs more than one wave of resident blocks (to try
// a wider tile).
template <typename T, int MT16, bool kTransB, int TN, int KC, int STAGES>
Status LaunchConfig(const KernelContext& ctx, const void* a, const void* b, void* c, int m,
                    int64_t n, int64_t k, float alpha, bool last_resort, bool* fits) {
  constexpr int kSmem = SmemBytes<kTransB, MT16, TN, KC, STAGES>();
  auto kernel = DecodePipeKernel<T, MT16, kTransB, TN, KC, STAGES>;
  int bps = 0;
  int smem = 0;
  bool pair_clusters = false;
  KERNELD_RETURN_IF_ERROR(PrepareKernel(kernel, ctx.device.device.index, kSmem, &bps, &smem,
                                        &PairClustersRun<decltype(kernel)>, &pair_clusters));
  *fits = false;
  if (smem < kSmem) return Status::Ok();  // the device's limit is lower
  const int64_t tiles = (n + TN - 1) / TN;
  const int64_t sms = std::max(ctx.device.sm_count, 1);
  // More tiles than one wave of resident blocks: a wider tile, if one is left.
  if (!last_resort && tiles > sms * bps) return Status::Ok();
  *fits = true;
  if (tiles > INT_MAX)
    return InvalidArgument("gemm: N too large for the decode kernel (use backend cublas)");
  // The fewest splits of K that put a block on 90% of the SMs: one split
  // wherever the column tiles already do (no partial sums, no second kernel).
  const int64_t chunks = (k + KC - 1) / KC;
  int64_t splits = std::max<int64_t>(1, (sms * 9 / 10 + tiles - 1) / tiles);
  splits = std::min(splits, chunks);
  const int64_t per_split = (chunks + splits - 1) / splits;
  SplitPlan plan;
  plan.splits = (chunks + per_split - 1) / per_split;
  if (plan.splits > 65535 || per_split > INT_MAX)
    return InvalidArgument("gemm: K too large for the decode kernel (use backend cublas)");
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(plan.splits));
  const auto* a16 = static_cast<const uint16_t*>(a);
  const auto* b16 = static_cast<const uint16_t*>(b);
  const int cps = static_cast<int>(per_split);
  if (plan.splits == 2 && ctx.device.compute_capability >= 90 && pair_clusters &&
      g_pair_clusters.load(std::memory_order_relaxed)) {
    // The two splits of a column tile as one cluster, summed through shared
    // memory: no workspace, no second kernel (H100, 16 x 4096 x 4096 bf16
    // in 64-column tiles: 20.8 -> 19.5 us). Clusters of 4 were slower than
    // the second kernel (23.0 -> 27.0 us): four blocks of 100+ KiB of shared
    // memory each must be placed together.
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = PairClusterConfig(grid, kSmem, StreamOf(ctx), &attr);
    g_pair_cluster_launches.fetch_add(1, std::memory_order_relaxed);
    return CudaStatus(cudaLaunchKernelEx(&cfg, kernel, a16, b16, static_cast<T*>(c),
                                         static_cast<float*>(nullptr), m, n, k, cps, alpha, true),
                      "gemm: cluster launch");
  }
  return RunSplits(ctx, plan, ctx.input("a").dtype, c, m, n, alpha, [&](float* partial) {
    kernel<<<grid, decode_pipe::kThreads, kSmem, StreamOf(ctx)>>>(
        a16, b16, static_cast<T*>(c), partial, m, n, k, cps, alpha, false);
    return CheckLaunch("gemm");
  });
}

// The configurations of one layout, most preferred first.
template <typename T, int MT16, bool kTransB>
Status LaunchLayout(const KernelContext& ctx, const void* a, const void* b, void* c, int m,
                    int64_t n, int64_t k, float alpha, bool* launched) {
  bool fits = false;
  if constexpr (kTransB) {
    KERNELD_RETURN_IF_ERROR(
        (LaunchConfig<T, MT16, true, 32, 256, 4>(ctx, a, b, c, m, n, k, alpha, false, &fits)));
    if (!fits)
      KERNELD_RETURN_IF_ERROR(
          (LaunchConfig<T, MT16, true, 64, 256, 3>(ctx, a, b, c, m, n, k, alpha, true, &fits)));
    if (!fits)
      KERNELD_RETURN_IF_ERROR(
          (LaunchConfig<T, MT16, true, 32, 128, 4>(ctx, a, b, c, m, n, k, alpha, true, &fits)));
  } else {
    KERNELD_RETURN_IF_ERROR(
        (LaunchConfig<T, MT16, false, 32, 256, 4>(ctx, a, b, c, m, n, k, alpha, false, &fits)));
    if (!fits)
      KERNELD_RETURN_IF_ERROR(
          (LaunchConfig<T, MT16, false, 64, 128, 4>(ctx, a, b, c, m, n, k, alpha, true, &fits)));
    if (!fits)
      KERNELD_RETURN_IF_ERROR(
          (LaunchConfig<T, MT16, false, 32, 128, 4>(ctx, a, b, c, m, n, k, alpha, true, &fits)));
  }
  *launched = fits;
  return Status::Ok();
}

template <typename T>
Status PipeTyped(KernelContext& ctx, bool* launched) {
  const TensorView& av = ctx.input("a");
  const TensorView& bv = ctx.input("b");
  const TensorView& cv = ctx.output("c");
  const bool tb = ctx.attr_b("transpose_b");
  const float alpha = static_cast<float>(ctx.attr_f("alpha"));
  const int64_t k = av.dim(1), n = cv.dim(1);
  const int m = static_cast<int>(av.dim(0));
  if (m <= 16)
    return tb ? LaunchLayout<T, 1, true>(ctx, av.raw(), bv.raw(), cv.raw(), m, n, k, alpha,
                                         launched)
              : LaunchLayout<T, 1, false>(ctx, av.raw(), bv.raw(), cv.raw(), m, n, k, alpha,
                                          launched);
  return tb ? LaunchLayout<T, 2, true>(ctx, av.raw(), bv.raw(), cv.raw(), m, n, k, alpha, launched)
            : LaunchLayout<T, 2, false>(ctx, av.raw(), bv.raw(), cv.raw(), m, n, k, alpha,
                                        launched);
}

}  // namespace

bool PipeEligible(KernelContext& ctx) {
  const TensorView& av = ctx.input("a");
  const TensorView& bv = ctx.input("b");
  const int64_t k = av.dim(1), n = ctx.output("c").dim(1);
  // Every 16-byte piece of a row of a or b must lie wholly inside or wholly
  // outside the matrix, at a 16-byte aligned address.
  return IsAligned16(av.raw()) && IsAligned16(bv.raw()) && k % 8 == 0 &&
         (ctx.attr_b("transpose_b") || n % 8 == 0);
}

Status GemmDecodePipe(KernelContext& ctx, bool* launched) {
  *launched = false;
  if (ctx.input("a").dtype == DType::kBFloat16) return PipeTyped<__nv_bfloat16>(ctx, launched);
  return PipeTyped<__half>(ctx, launched);
}

void SetPairClustersForTesting(bool enabled) { g_pair_clusters.store(enabled); }
int64_t PairClusterLaunchesForTesting() { return g_pair_cluster_launches.load(); }

}  // namespace kerneld::cuda::decode_gemm
