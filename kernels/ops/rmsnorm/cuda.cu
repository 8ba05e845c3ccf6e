// rmsnorm, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status RmsNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& w = ctx.input("weight");
  TensorView& y = ctx.output("y");
  const RowShape r = RowsOf(x);
  if (r.rows == 0) return Status::Ok();
  const auto eps = static_cast<float>(ctx.attr_f("eps"));
  const auto bias = static_cast<float>(ctx.attr_f("weight_bias"));
  return DispatchFloatingCuda(x.dtype, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        rmsnorm::RmsNorm<T>(x.ptr<T>(), w.ptr<T>(), y.ptr<T>(), r.rows, r.h, eps, bias,
                            ctx.device.sm_count, ctx.device.compute_capability, StreamOf(ctx)),
        "rmsnorm");
  });
}

}  // namespace

KERNELD_IMPL(rmsnorm, cuda) { op.Impl("cuda", RmsNorm, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
