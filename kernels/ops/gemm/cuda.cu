// gemm, CUDA binding of the hand-written decode kernels (M <= 32): the FMA
// kernel (cuda.cuh), the register-window tensor-core kernel
// (gemm_decode_mma.cuh, bound in gemm_decode_mma.cu) and the pipelined one
// (gemm_decode_pipe.cuh, bound in gemm_decode_pipe.cu). Here: the one
// chooser among them (ChooseDecodeKernel), the FMA kernel's binding, the
// split-K workspace pool that all three use, and the registration.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/workspace_pool.cuh"
#include "kerneld/op.h"
#include "ops/gemm/args.h"
#include "ops/gemm/cuda.cuh"
#include "ops/gemm/gemm_decode.cuh"

namespace kerneld::cuda {

namespace {

template <typename T>
Status GemmDecodeFma(KernelContext& ctx) {
  const gemm::GemmArgs<T> g = gemm::GemmArgsOf<T>(ctx);
  const int mi = static_cast<int>(g.m);
  decode_fma::Plan plan;
  Status setup;
  const cudaError_t e =
      decode_fma::PlanGemmDecodeFma(g.b, mi, g.n, g.k, g.transpose_b, ctx.device.sm_count,
                                    decode_gemm::PrepareOn{ctx.device.device.index, &setup}, &plan);
  if (e != cudaSuccess) return decode_gemm::PlanStatus(e, setup);
  return decode_gemm::RunSplits(
      ctx, plan.split, ctx.input("a").dtype, g.c, mi, g.n, g.alpha, [&](float* partial) {
        return CudaStatus(decode_fma::GemmDecodeFma(plan, g.a, g.b, g.c, g.alpha, partial,
                                                    plan.workspace_bytes, StreamOf(ctx)),
                          "gemm");
      });
}

template <typename T>
Status ReduceSplitsOf(const KernelContext& ctx, const float* partial, void* c, int64_t mn,
                      int splits, float alpha) {
  return CudaStatus(decode_gemm::ReduceSplits<T>(partial, static_cast<T*>(c), mn, splits, alpha,
                                                 ctx.device.sm_count, StreamOf(ctx)),
                    "gemm: split-K reduction");
}

}  // namespace

namespace decode_gemm {

Status RunSplits(const KernelContext& ctx, const SplitPlan& plan, DType dtype, void* c, int64_t m,
                 int64_t n, float alpha, const std::function<Status(float* partial)>& launch) {
  if (plan.splits <= 1) return launch(nullptr);
  cudaStream_t s = StreamOf(ctx);
  const size_t bytes = SplitWorkspaceBytes(plan.splits, m, n);
  // The split-K partials come from the retained pool (workspace_pool.cuh).
  float* partial = nullptr;
  KERNELD_RETURN_IF_ERROR(AllocateWorkspace(ctx.device.device.index, bytes, s,
                                            "gemm: split-K partials",
                                            reinterpret_cast<void**>(&partial)));
  auto run = [&]() -> Status {
    KERNELD_RETURN_IF_ERROR(launch(partial));
    const int64_t mn = m * n;
    const int splits = static_cast<int>(plan.splits);
    switch (dtype) {
      case DType::kFloat16:
        return ReduceSplitsOf<__half>(ctx, partial, c, mn, splits, alpha);
      case DType::kBFloat16:
        return ReduceSplitsOf<__nv_bfloat16>(ctx, partial, c, mn, splits, alpha);
      default:
        return ReduceSplitsOf<float>(ctx, partial, c, mn, splits, alpha);
    }
  };
  const Status st = run();
  const Status freed = CudaStatus(cudaFreeAsync(partial, s), "gemm: freeing split-K workspace");
  return st.ok() ? freed : st;
}

}  // namespace decode_gemm

// Which decode kernel runs a request: the one place the choice is made.
//   float32, any compute capability       -> kFma  (exact float32 FMAs, cuda.cuh)
//   float16 / bfloat16, cc < 8.0          -> kFma
//   float16 / bfloat16, cc >= 8.0         -> tensor cores:
//     kPipe (gemm_decode_pipe.cuh) where pipe_eligible (a and b 16-byte
//       aligned, K % 8 == 0, and N % 8 == 0 for b [K, N]: PipeEligible);
//     kMma  (the register-window kernel, gemm_decode_mma.cuh) otherwise.
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
