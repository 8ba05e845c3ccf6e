// fused_add_rmsnorm, CUDA: the binding of the kernels in ops/rmsnorm/cuda.cuh.
#include "kerneld/op.h"
#include "ops/rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status FusedAddRmsNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& r = ctx.input("residual");
  const TensorView& w = ctx.input("weight");
  TensorView& xo = ctx.output("x");
  TensorView& ro = ctx.output("residual");
  const NormArgs a = ArgsOf(ctx, x);
  if (a.rows == 0) return Status::Ok();
  return DispatchFloatingCuda(x.dtype, "fused_add_rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    const T* rp = r.ptr<T>();
    const T* wp = w.ptr<T>();
    T* xop = xo.ptr<T>();
    T* rop = ro.ptr<T>();
    if (VectorRowsOk<T>(a.h, {xp, rp, wp, xop, rop}))
      return LaunchFused<T, kVecN<T>>(ctx, xp, rp, wp, xop, rop, a);
    return LaunchFused<T, 1>(ctx, xp, rp, wp, xop, rop, a);
  });
}

}  // namespace

KERNELD_IMPL(fused_add_rmsnorm, cuda) {
  op.Impl("cuda", FusedAddRmsNorm, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
