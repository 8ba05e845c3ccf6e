// rmsnorm, CUDA: the binding of the kernels in ops/rmsnorm/cuda.cuh.
#include "kerneld/op.h"
#include "ops/rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status RmsNorm(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  const TensorView& w = ctx.input("weight");
  TensorView& y = ctx.output("y");
  const NormArgs a = ArgsOf(ctx, x);
  if (a.rows == 0) return Status::Ok();
  return DispatchFloatingCuda(x.dtype, "rmsnorm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    const T* wp = w.ptr<T>();
    T* yp = y.ptr<T>();
    if (VectorRowsOk<T>(a.h, {xp, wp, yp})) return LaunchRmsNorm<T, kVecN<T>>(ctx, xp, wp, yp, a);
    return LaunchRmsNorm<T, 1>(ctx, xp, wp, yp, a);
  });
}

}  // namespace

KERNELD_IMPL(rmsnorm, cuda) { op.Impl("cuda", RmsNorm, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
