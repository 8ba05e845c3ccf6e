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
#include "ops/gemm/gemm_decode.cuh"
#include "ops/gemm/gemm_decode_mma.cuh"

namespace kerneld::cuda::decode_gemm {

namespace {

template <typename T>
Status MmaTyped(KernelContext& ctx) {
  const TensorView& av = ctx.input("a");
  const TensorView& bv = ctx.input("b");
  TensorView& cv = ctx.output("c");
  const bool tb = ctx.attr_b("transpose_b");
  const float alpha = static_cast<float>(ctx.attr_f("alpha"));
  const int64_t k = av.dim(1), n = cv.dim(1);
  const int m = static_cast<int>(av.dim(0));
  const T* a = static_cast<const T*>(av.raw());
  const T* b = static_cast<const T*>(bv.raw());
  T* c = static_cast<T*>(cv.raw());
  decode_mma::Plan plan;
  Status setup;
  const cudaError_t e = decode_mma::PlanGemmDecodeMma(
      b, m, n, k, tb, ctx.device.compute_capability, ctx.device.sm_count,
      PrepareOn{ctx.device.device.index, &setup}, &plan);
  if (e != cudaSuccess) return PlanStatus(e, setup);
  return RunSplits(ctx, plan.split, av.dtype, c, m, n, alpha, [&](float* partial) {
    return CudaStatus(decode_mma::GemmDecodeMma(plan, a, b, c, alpha, partial, plan.workspace_bytes,
                                                StreamOf(ctx)),
                      "gemm");
  });
}

}  // namespace

Status GemmDecodeMma(KernelContext& ctx) {
  if (ctx.input("a").dtype == DType::kBFloat16) return MmaTyped<__nv_bfloat16>(ctx);
  return MmaTyped<__half>(ctx);
}

}  // namespace kerneld::cuda::decode_gemm
