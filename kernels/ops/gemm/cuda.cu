// gemm, hand-written CUDA kernels for decode shapes (M <= 32).
//
// With few rows in a, c = a @ b is a stream over b: every element of b is
// read once and used M times, so the kernels are built to keep DRAM busy.
// float16 / bfloat16 on compute capability >= 8.0 take the tensor-core
// kernel (gemm_decode_mma.cu); float32 (and half types on older GPUs) take
// the FMA kernel here, which computes in exact float32:
//  - a block owns a tile of 128 columns of c (b [K, N]: a lane owns 4
//    adjacent columns, one 8- or 16-byte load per k row) or 64 (b [N, K]:
//    a lane owns 2 rows of b, one 16-byte load per row and step along k),
//    and a slab of K; its 8 warps split the slab, each streaming its part
//    with kStages loads per lane in flight (a rolling register window,
//    started before the a slab is staged so that its latency overlaps).
//  - all lanes of a warp work on the same k at the same time, so their
//    reads of a, kept in shared memory as float32 for the whole slab, are
//    broadcasts: the FMAs, not shared memory, bound the inner loop.
//  - M is covered by tiles of up to 16 rows (grid.x, next to the column
//    tiles, so the tiles that read the same b run together and share L2).
//  - when the column tiles alone cannot fill the GPU, K is split over
//    blocks (grid.y); each split writes float32 partial sums and a second
//    kernel adds them in split order, scales by alpha and rounds once.
// Every sum has a fixed order (lane over its k, warps 0..7, splits 0..S-1),
// so results are deterministic. Unaligned b or N % 4 != 0 (K % 8 for
// [N, K]) selects the scalar-load variant of the same kernel.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"
#include "kerneld/op.h"
#include "ops/gemm/gemm_decode.cuh"

namespace kerneld::cuda {

namespace {

using decode_gemm::kSmemBytes;
using decode_gemm::kThreads;
using decode_gemm::kWarps;
constexpr int kStages = 4;  // b loads in flight per lane

template <bool kTransB>
constexpr int kTileN = kTransB ? 64 : 128;
// k covered by one step of a lane: 4 rows of b [K, N]; one 16-byte run of a
// row of b [N, K].
template <typename T, bool kTransB>
constexpr int kStepK = kTransB ? 16 / static_cast<int>(sizeof(T)) : 4;
// Values per lane per step: 4 rows x 4 columns, or 2 rows x kStepK.
template <typename T, bool kTransB>
constexpr int kLoadN = kTransB ? kStepK<T, kTransB> : 4;
template <bool kTransB>
constexpr int kLoads = kTransB ? 2 : 4;
template <bool kTransB>
constexpr int kAccN = kTransB ? 2 : 4;  // outputs per lane per row of a

template <typename T, int N>
struct alignas(sizeof(T) * N) GPack {
  T v[N];
};

template <typename T, bool kTransB>
struct Stage {
  GPack<T, kLoadN<T, kTransB>> p[kLoads<kTransB>];
};

// Loads one step of b for this lane; zeros past the warp's k range or the
// matrix edge (so the FMAs that follow add exact zeros).
template <typename T, bool kTransB, bool kVec>
__device__ __forceinline__ Stage<T, kTransB> LoadStage(const T* __restrict__ b, int64_t n_total,
                                                       int64_t k_total, int64_t k, int64_t k_end,
                                                       int64_t n_lane) {
  constexpr int L = kLoadN<T, kTransB>;
  Stage<T, kTransB> s;
#pragma unroll
  for (int r = 0; r < kLoads<kTransB>; ++r) {
    if constexpr (!kTransB) {
      // Row k + r, columns n_lane .. n_lane + 3.
      const int64_t kr = k + r;
      const T* p = b + kr * n_total + n_lane;
      if constexpr (kVec) {
        if (kr < k_end && n_lane < n_total) {
          s.p[r] = *reinterpret_cast<const GPack<T, L>*>(p);
        } else {
#pragma unroll
          for (int e = 0; e < L; ++e) s.p[r].v[e] = FromFloat<T>(0.0f);
        }
      } else {
#pragma unroll
        for (int e = 0; e < L; ++e)
          s.p[r].v[e] = (kr < k_end && n_lane + e < n_total) ? p[e] : FromFloat<T>(0.0f);
      }
    } else {
      // Row n_lane + 32 r of b, k .. k + L - 1.
      const int64_t n = n_lane + 32 * r;
      const T* p = b + n * k_total + k;
      if constexpr (kVec) {
        if (k < k_end && n < n_total) {
          s.p[r] = *reinterpret_cast<const GPack<T, L>*>(p);
        } else {
#pragma unroll
          for (int e = 0; e < L; ++e) s.p[r].v[e] = FromFloat<T>(0.0f);
        }
      } else {
#pragma unroll
        for (int e = 0; e < L; ++e)
          s.p[r].v[e] = (k + e < k_end && n < n_total) ? p[e] : FromFloat<T>(0.0f);
      }
    }
  }
  return s;
}

// acc[m][j] += a[m][kk ..] . b-step; a_s rows are `slab` floats apart.
template <typename T, int MT, bool kTransB>
__device__ __forceinline__ void ComputeStage(const Stage<T, kTransB>& s, const float* a_s, int slab,
                                             int kk, float (&acc)[MT][kAccN<kTransB>]) {
  constexpr int L = kLoadN<T, kTransB>;
  float bf[kLoads<kTransB>][L];
#pragma unroll
  for (int r = 0; r < kLoads<kTransB>; ++r)
#pragma unroll
    for (int e = 0; e < L; ++e) bf[r][e] = ToFloat(s.p[r].v[e]);
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if constexpr (!kTransB) {
      // 4 k rows x 4 columns: a[m][kk .. kk+3] is one broadcast float4.
      const float4 a4 = *reinterpret_cast<const float4*>(a_s + m * slab + kk);
      const float av[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[m][j] = fmaf(av[r], bf[r][j], acc[m][j]);
    } else {
      // 2 rows of b x L values of k.
      float av[L];
#pragma unroll
      for (int e = 0; e < L; e += 4) {
        const float4 a4 = *reinterpret_cast<const float4*>(a_s + m * slab + kk + e);
        av[e] = a4.x, av[e + 1] = a4.y, av[e + 2] = a4.z, av[e + 3] = a4.w;
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int e = 0; e < L; ++e) acc[m][r] = fmaf(av[e], bf[r][e], acc[m][r]);
    }
  }
}

// Two blocks per SM where the accumulators allow it; 8 and 16 rows of a need
// more than 128 registers per thread, and spilling them would cost more
// than the second block gains.
template <typename T, int MT, bool kTransB, bool kVec>
__global__ void __launch_bounds__(kThreads, MT >= 8 ? 1 : 2)
    DecodeGemmKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c,
                     float* __restrict__ partial, int m_total, int64_t n_total, int64_t k_total,
                     int slab, int warp_k, int m_tiles, float alpha) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  constexpr int TN = kTileN<kTransB>;
  constexpr int SK = kStepK<T, kTransB>;
  constexpr int A = kAccN<kTransB>;
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int m0 = static_cast<int>(blockIdx.x % m_tiles) * MT;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x / m_tiles) * TN;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * slab;
  const int slab_len = static_cast<int>(k_total - k0 < slab ? k_total - k0 : slab);

  // This warp's part of the slab, streamed with kStages steps in flight.
  // The first window is requested before the a slab is staged, so the two
  // latencies overlap.
  const int wk0 = warp * warp_k;
  const int wk1 = wk0 + warp_k < slab_len ? wk0 + warp_k : slab_len;
  const int steps = wk1 > wk0 ? (wk1 - wk0 + SK - 1) / SK : 0;
  const int64_t n_lane = kTransB ? n0 + lane : n0 + 4 * lane;
  auto load = [&](int step) {
    // Past the last step: an out-of-range k loads nothing.
    const int64_t k = k0 + wk0 + static_cast<int64_t>(step) * SK;
    return LoadStage<T, kTransB, kVec>(b, n_total, k_total, step < steps ? k : k_total, k0 + wk1,
                                       n_lane);
  };
  Stage<T, kTransB> window[kStages];
#pragma unroll
  for (int d = 0; d < kStages; ++d) window[d] = load(d);

  // The block's slab of a, as float32, zero past M and past K: a warp per
  // row, coalesced.
  for (int m = warp; m < MT; m += kWarps) {
    const T* src = a + (m0 + m) * k_total + k0;
    const bool row_ok = m0 + m < m_total;
    for (int kk = lane; kk < slab; kk += 32)
      smem[m * slab + kk] = row_ok && kk < slab_len ? ToFloat(src[kk]) : 0.0f;
  }
  __syncthreads();

  float acc[MT][A];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < A; ++j) acc[m][j] = 0.0f;
  for (int s0 = 0; s0 < steps; s0 += kStages) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) {
      if (s0 + d < steps) {
        const Stage<T, kTransB> cur = window[d];
        window[d] = load(s0 + d + kStages);
        ComputeStage<T, MT, kTransB>(cur, smem, slab, wk0 + (s0 + d) * SK, acc);
      }
    }
  }

  // Across warps, in warp order, in shared memory (the a slab is done).
  __syncthreads();
  float* red = smem;  // [MT][TN]
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < A; ++j) {
          const int col = kTransB ? lane + 32 * j : 4 * lane + j;
          red[m * TN + col] = w == 0 ? acc[m][j] : red[m * TN + col] + acc[m][j];
        }
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < MT * TN; i += kThreads) {
    const int m = i / TN, col = i - m * TN;
    const int64_t n = n0 + col;
    if (m0 + m >= m_total || n >= n_total) continue;
    const int64_t at = (m0 + m) * n_total + n;
    if (partial == nullptr)
      c[at] = FromFloat<T>(alpha * red[i]);
    else
      partial[static_cast<int64_t>(blockIdx.y) * m_total * n_total + at] = red[i];
  }
}

// c = alpha * sum over splits of the partials, in split order.
template <typename T>
__global__ void ReduceSplitsKernel(const float* __restrict__ partial, T* __restrict__ c, int64_t mn,
                                   int splits, float alpha) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < mn;
       i += int64_t{gridDim.x} * blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < splits; ++k) s += partial[k * mn + i];
    c[i] = FromFloat<T>(alpha * s);
  }
}

template <typename T, int MT, bool kTransB, bool kVec>
Status Launch(const KernelContext& ctx, const T* a, const T* b, T* c, int m, int64_t n, int64_t k,
              float alpha, int m_tiles) {
  constexpr int TN = kTileN<kTransB>;
  constexpr int SK = kStepK<T, kTransB>;
  auto kernel = DecodeGemmKernel<T, MT, kTransB, kVec>;
  int bps = 0;
  int smem_limit = 0;
  KERNELD_RETURN_IF_ERROR(
      decode_gemm::PrepareKernel(kernel, ctx.device.device.index, kSmemBytes, &bps, &smem_limit));
  const int64_t tiles = (n + TN - 1) / TN * m_tiles;
  const int64_t unit = int64_t{kWarps} * SK;
  const int64_t max_slab = std::max<int64_t>(unit, (smem_limit / 4 / MT) / unit * unit);
  const decode_gemm::SplitPlan plan = decode_gemm::PlanSplits(ctx, k, tiles, SK, max_slab, bps);
  if (plan.splits > 65535 || tiles > INT_MAX)
    return InvalidArgument("gemm: shape too large for the decode kernel (use backend cublas)");
  const size_t smem = static_cast<size_t>(MT) *
                      static_cast<size_t>(std::max<int64_t>(plan.slab, TN)) * sizeof(float);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(plan.splits));
  return decode_gemm::RunSplits(ctx, plan, ctx.input("a").dtype, c, m, n, alpha,
                                [&](float* partial) {
                                  kernel<<<grid, kThreads, smem, StreamOf(ctx)>>>(
                                      a, b, c, partial, m, n, k, static_cast<int>(plan.slab),
                                      static_cast<int>(plan.warp_k), m_tiles, alpha);
                                  return CheckLaunch("gemm");
                                });
}

template <typename T, bool kTransB, bool kVec>
Status DispatchM(const KernelContext& ctx, const T* a, const T* b, T* c, int m, int64_t n,
                 int64_t k, float alpha) {
  const int m_tiles = (m + 15) / 16;
  if (m <= 1) return Launch<T, 1, kTransB, kVec>(ctx, a, b, c, m, n, k, alpha, 1);
  if (m <= 2) return Launch<T, 2, kTransB, kVec>(ctx, a, b, c, m, n, k, alpha, 1);
  if (m <= 4) return Launch<T, 4, kTransB, kVec>(ctx, a, b, c, m, n, k, alpha, 1);
  if (m <= 8) return Launch<T, 8, kTransB, kVec>(ctx, a, b, c, m, n, k, alpha, 1);
  return Launch<T, 16, kTransB, kVec>(ctx, a, b, c, m, n, k, alpha, m_tiles);
}

template <typename T>
Status GemmDecodeFma(KernelContext& ctx) {
  const TensorView& av = ctx.input("a");
  const TensorView& bv = ctx.input("b");
  TensorView& cv = ctx.output("c");
  const bool tb = ctx.attr_b("transpose_b");
  const float alpha = static_cast<float>(ctx.attr_f("alpha"));
  const int64_t m = av.dim(0), k = av.dim(1), n = cv.dim(1);
  const T* a = static_cast<const T*>(av.raw());
  const T* b = static_cast<const T*>(bv.raw());
  T* c = static_cast<T*>(cv.raw());
  const int mi = static_cast<int>(m);
  if (!tb) {
    // 4 adjacent columns per load: rows of b must keep 4-element alignment.
    const bool vec = n % 4 == 0 && reinterpret_cast<uintptr_t>(b) % (4 * sizeof(T)) == 0;
    return vec ? DispatchM<T, false, true>(ctx, a, b, c, mi, n, k, alpha)
               : DispatchM<T, false, false>(ctx, a, b, c, mi, n, k, alpha);
  }
  const bool vec = k % kStepK<T, true> == 0 && IsAligned16(b);
  return vec ? DispatchM<T, true, true>(ctx, a, b, c, mi, n, k, alpha)
             : DispatchM<T, true, false>(ctx, a, b, c, mi, n, k, alpha);
}

template <typename T>
Status ReduceSplits(const KernelContext& ctx, const float* partial, void* c, int64_t mn, int splits,
                    float alpha) {
  ReduceSplitsKernel<T><<<GridFor(ctx, mn, 256), 256, 0, StreamOf(ctx)>>>(
      partial, static_cast<T*>(c), mn, splits, alpha);
  return CheckLaunch("gemm: split-K reduction");
}

}  // namespace

namespace decode_gemm {

namespace {

// The split-K workspace comes from a stream-ordered pool of our own per
// device that keeps up to kRetainBytes after a synchronize. The default
// pool's release threshold is 0: it hands its memory back to the driver at
// every synchronize, so each call would map fresh memory, tens of
// microseconds of host time during which the GPU waits (measured: the
// whole 16x4096x4096 bf16 call 73 us against 22 us for cuBLAS).
constexpr uint64_t kRetainBytes = uint64_t{256} << 20;

Status WorkspacePool(int device, cudaMemPool_t* out) {
  static std::mutex mu;
  static std::map<int, cudaMemPool_t> pools;  // process lifetime
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools.find(device);
  if (it == pools.end()) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    KERNELD_RETURN_IF_ERROR(CudaStatus(cudaMemPoolCreate(&pool, &props), "gemm: workspace pool"));
    uint64_t retain = kRetainBytes;
    KERNELD_RETURN_IF_ERROR(
        CudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &retain),
                   "gemm: workspace pool threshold"));
    it = pools.emplace(device, pool).first;
  }
  *out = it->second;
  return Status::Ok();
}

}  // namespace

SplitPlan PlanSplits(const KernelContext& ctx, int64_t k, int64_t tiles, int step_k,
                     int64_t max_slab, int blocks_per_sm) {
  const int64_t slots = int64_t{std::max(ctx.device.sm_count, 1)} * blocks_per_sm;
  const int64_t unit = int64_t{kWarps} * step_k;  // one step per warp
  const int64_t max_splits = std::max<int64_t>(1, (k + unit - 1) / unit);
  const int64_t fewest = std::min((k + max_slab - 1) / max_slab, max_splits);
  tiles = std::max<int64_t>(tiles, 1);
  // The fewest splits (least partial-sum traffic) whose blocks fill their
  // last wave of resident slots to 90%; else the best filled.
  int64_t splits = fewest;
  double best = -1;
  for (int64_t s = fewest; s <= std::min(max_splits, fewest + 64); ++s) {
    const int64_t blocks = tiles * s;
    const double fill =
        static_cast<double>(blocks) / static_cast<double>((blocks + slots - 1) / slots * slots);
    if (fill > best + 1e-9) best = fill, splits = s;
    if (fill >= 0.9) break;
  }
  SplitPlan p;
  const int64_t per = (k + splits - 1) / splits;
  p.warp_k = ((per + kWarps - 1) / kWarps + step_k - 1) / step_k * step_k;
  p.slab = p.warp_k * kWarps;
  p.splits = (k + p.slab - 1) / p.slab;
  return p;
}

Status RunSplits(const KernelContext& ctx, const SplitPlan& plan, DType dtype, void* c, int64_t m,
                 int64_t n, float alpha, const std::function<Status(float* partial)>& launch) {
  if (plan.splits <= 1) return launch(nullptr);
  cudaStream_t s = StreamOf(ctx);
  const size_t bytes = static_cast<size_t>(plan.splits) * static_cast<size_t>(m) *
                       static_cast<size_t>(n) * sizeof(float);
  cudaMemPool_t pool = nullptr;
  KERNELD_RETURN_IF_ERROR(WorkspacePool(ctx.device.device.index, &pool));
  float* partial = nullptr;
  if (cudaError_t e = cudaMallocFromPoolAsync(reinterpret_cast<void**>(&partial), bytes, pool, s);
      e != cudaSuccess) {
    cudaGetLastError();
    return ResourceExhausted("gemm: cannot allocate " + std::to_string(bytes) +
                             " bytes of split-K workspace: " + cudaGetErrorString(e));
  }
  auto run = [&]() -> Status {
    KERNELD_RETURN_IF_ERROR(launch(partial));
    const int64_t mn = m * n;
    const int splits = static_cast<int>(plan.splits);
    switch (dtype) {
      case DType::kFloat16:
        return ReduceSplits<__half>(ctx, partial, c, mn, splits, alpha);
      case DType::kBFloat16:
        return ReduceSplits<__nv_bfloat16>(ctx, partial, c, mn, splits, alpha);
      default:
        return ReduceSplits<float>(ctx, partial, c, mn, splits, alpha);
    }
  };
  const Status st = run();
  const Status freed = CudaStatus(cudaFreeAsync(partial, s), "gemm: freeing split-K workspace");
  return st.ok() ? freed : st;
}

}  // namespace decode_gemm

// Which decode kernel runs a request: the one place the choice is made.
//   float32, any compute capability       -> kFma  (exact float32 FMAs, this file)
//   float16 / bfloat16, cc < 8.0          -> kFma
//   float16 / bfloat16, cc >= 8.0         -> tensor cores:
//     kPipe (gemm_decode_pipe.cu) where pipe_eligible (a and b 16-byte
//       aligned, K % 8 == 0, and N % 8 == 0 for b [K, N]: PipeEligible);
//     kMma  (the register-window kernel, gemm_decode_mma.cu) otherwise.
// kPipe falls back to kMma when no tile configuration fits the device's
// shared memory: only the launch attempt (per-device kernel attributes)
// knows that, so GemmDecode does that last step.
enum class DecodeKernel { kFma, kPipe, kMma };
DecodeKernel ChooseDecodeKernel(DType dtype, int compute_capability, bool pipe_eligible) {
  if (dtype == DType::kFloat32 || compute_capability < 80) return DecodeKernel::kFma;
  return pipe_eligible ? DecodeKernel::kPipe : DecodeKernel::kMma;
}

Status GemmDecode(KernelContext& ctx) {
  const TensorView& a = ctx.input("a");
  TensorView& c = ctx.output("c");
  const int64_t m = a.dim(0), k = a.dim(1), n = c.dim(1);
  if (m == 0 || n == 0) return Status::Ok();
  if (m > 32)
    return InvalidArgument("gemm: the cuda decode kernel takes M <= 32, got " + std::to_string(m));
  if (k == 0)  // an empty sum: c = 0 (all-zero bits in every float type)
    return CudaStatus(cudaMemsetAsync(c.raw(), 0, static_cast<size_t>(c.nbytes()), StreamOf(ctx)),
                      "gemm");
  switch (a.dtype) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
      break;
    default:
      return InvalidArgument("gemm: cuda has no " + std::string(DTypeName(a.dtype)) + " kernel");
  }
  const bool pipe_eligible = a.dtype != DType::kFloat32 && ctx.device.compute_capability >= 80 &&
                             decode_gemm::PipeEligible(ctx);
  switch (ChooseDecodeKernel(a.dtype, ctx.device.compute_capability, pipe_eligible)) {
    case DecodeKernel::kPipe: {
      bool launched = false;
      KERNELD_RETURN_IF_ERROR(decode_gemm::GemmDecodePipe(ctx, &launched));
      if (launched) return Status::Ok();
      return decode_gemm::GemmDecodeMma(ctx);  // no tile configuration fits
    }
    case DecodeKernel::kMma:
      return decode_gemm::GemmDecodeMma(ctx);
    case DecodeKernel::kFma:
      break;
  }
  if (a.dtype == DType::kFloat16) return GemmDecodeFma<__half>(ctx);
  if (a.dtype == DType::kBFloat16) return GemmDecodeFma<__nv_bfloat16>(ctx);
  return GemmDecodeFma<float>(ctx);
}

namespace {

bool TransposeB(const AttrMap& attrs) {
  auto it = attrs.find("transpose_b");
  return it != attrs.end() && std::get<bool>(it->second);
}

// The decode kernel keeps M rows of a per block; larger M goes to cuBLAS.
constexpr int64_t kDecodeMaxM = 32;

// Static ranks (docs/kernels.md, bench/kernel_bench --gemm-shapes on an H100,
// 2026-11-24, L2 flushed both clean and dirty): cuBLASLt (kPriorityDevice)
// ranks first. The hand-written decode kernel is ahead in both flush
// methods only on float32 with b [K, N] at M 8..16 and N 4096..6144
// (cuBLASLt's algorithm choice there: 16x4096x4096 79.6 us vs 46.7 us), so
// it ranks first there (kDecodeWinsRank). On half types it is 3-7% ahead at
// 1..16 x 4096 x 4096 with b [N, K] after a clean flush but 2-8% behind
// after a dirty one, and behind on every other shape: no rule.
constexpr int kDecodeRank = kPriorityDevice - 5;
constexpr int kDecodeWinsRank = kPriorityDevice + 5;

// Where the decode kernel beats cuBLASLt (see the ranking note below): float32
// with b [K, N], 8 <= M <= 16, 4096 <= N <= 6144, K <= 4096.
std::optional<int> DecodeRankFor(const KernelContext& ctx) {
  if (ctx.inputs.size() < 2 || TransposeB(ctx.attrs)) return std::nullopt;
  const TensorView& a = ctx.inputs[0];
  const TensorView& b = ctx.inputs[1];
  if (a.dtype != DType::kFloat32 || a.shape.size() != 2 || b.shape.size() != 2) return std::nullopt;
  const int64_t m = a.shape[0], k = b.shape[0], n = b.shape[1];
  if (m >= 8 && m <= 16 && n >= 4096 && n <= 6144 && k <= 4096) return kDecodeWinsRank;
  return std::nullopt;
}

std::optional<std::string> DecodeShape(const KernelContext& ctx) {
  if (ctx.inputs.empty()) return std::nullopt;
  const int64_t m = ctx.inputs[0].shape.empty() ? 0 : ctx.inputs[0].shape[0];
  if (m > kDecodeMaxM)
    return "M = " + std::to_string(m) + " > " + std::to_string(kDecodeMaxM) +
           " (the decode kernel is for small M)";
  return std::nullopt;
}

}  // namespace

KERNELD_IMPL(gemm, cuda) {
  op.Impl("cuda", GemmDecode, Requirements::Cuda(70).When("M <= 32", DecodeShape), kDecodeRank);
  op.impls.back().priority_for = DecodeRankFor;
  op.impls.back().priority_doc =
      "ranks above cublas for float32 with b [K, N], 8 <= M <= 16, 4096 <= N <= 6144, K <= 4096 "
      "(measured faster there on an H100)";
}

}  // namespace kerneld::cuda
