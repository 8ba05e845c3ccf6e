// fused_add_rmsnorm, CUDA binding: adapts the KernelContext to the launcher
// in cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/fused_add_rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status FusedAddRmsNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& r = ctx.input("residual");
  const TensorView& w = ctx.input("weight");
  TensorView& xo = ctx.output("x");
  TensorView& ro = ctx.output("residual");
  const RowShape rs = RowsOf(x);
  if (rs.rows == 0) return Status::Ok();
  const auto eps = static_cast<float>(ctx.attr_f("eps"));
  const auto bias = static_cast<float>(ctx.attr_f("weight_bias"));
  return DispatchFloatingCuda(x.dtype, "fused_add_rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        fused_add_rmsnorm::FusedAddRmsNorm<T>(
            x.ptr<T>(), r.ptr<T>(), w.ptr<T>(), xo.ptr<T>(), ro.ptr<T>(), rs.rows, rs.h, eps, bias,
            ctx.device.sm_count, ctx.device.compute_capability, StreamOf(ctx)),
        "fused_add_rmsnorm");
  });
}

}  // namespace

KERNELD_IMPL(fused_add_rmsnorm, cuda) {
  op.Impl("cuda", FusedAddRmsNorm, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
