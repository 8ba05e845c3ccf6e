// gemm, binding of the register-window tensor-core decode kernel
// (gemm_decode_mma.cuh: float16 / bfloat16, M <= 32, compute capability
// >= 8.0): plans with the per-device kernel setup (PrepareKernel) and runs
// the plan with the split-K workspace (RunSplits). ChooseDecodeKernel
// (cuda.cu) decides when it runs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"
#include "ops/gemm/args.h"
#include "ops/gemm/gemm_decode.cuh"
#include "ops/gemm/gemm_decode_mma.cuh"

namespace kerneld::cuda::decode_gemm {

namespace {

template <typename T>
Status MmaTyped(KernelContext& ctx) {
  const gemm::GemmArgs<T> g = gemm::GemmArgsOf<T>(ctx);
  const int m = static_cast<int>(g.m);
  decode_mma::Plan plan;
  Status setup;
  const cudaError_t e = decode_mma::PlanGemmDecodeMma(
      g.b, m, g.n, g.k, g.transpose_b, ctx.device.compute_capability, ctx.device.sm_count,
      PrepareOn{ctx.device.device.index, &setup}, &plan);
  if (e != cudaSuccess) return PlanStatus(e, setup);
  return RunSplits(
      ctx, plan.split, ctx.input("a").dtype, g.c, m, g.n, g.alpha, [&](float* partial) {
        return CudaStatus(decode_mma::GemmDecodeMma(plan, g.a, g.b, g.c, g.alpha, partial,
                                                    plan.workspace_bytes, StreamOf(ctx)),
                          "gemm");
      });
}

}  // namespace

Status GemmDecodeMma(KernelContext& ctx) {
  if (ctx.input("a").dtype == DType::kBFloat16) return MmaTyped<__nv_bfloat16>(ctx);
  return MmaTyped<__half>(ctx);
}

}  // namespace kerneld::cuda::decode_gemm
