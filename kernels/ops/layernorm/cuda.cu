// layernorm, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/layernorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status LayerNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& g = ctx.input("gamma");
  const TensorView& b = ctx.input("beta");
  TensorView& y = ctx.output("y");
  const RowShape r = RowsOf(x);
  if (r.rows == 0) return Status::Ok();
  const auto eps = static_cast<float>(ctx.attr_f("eps"));
  return DispatchFloatingCuda(x.dtype, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        layernorm::LayerNorm<T>(x.ptr<T>(), g.ptr<T>(), b.ptr<T>(), y.ptr<T>(), r.rows, r.h, eps,
                                ctx.device.sm_count, ctx.device.compute_capability, StreamOf(ctx)),
        "layernorm");
  });
}

}  // namespace

KERNELD_IMPL(layernorm, cuda) {
  op.Impl("cuda", LayerNorm, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
