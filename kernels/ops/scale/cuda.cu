// scale, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/scale/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status Scale(KernelContext& ctx) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const float f = static_cast<float>(ctx.attr_f("factor"));
  const int64_t n = x.numel();
  if (n == 0) return Status::Ok();
  return DispatchFloatingCuda(x.dtype, "scale", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        scale::Scale<T>(x.ptr<T>(), y.ptr<T>(), n, f, ctx.device.sm_count, StreamOf(ctx)), "scale");
  });
}

}  // namespace

KERNELD_IMPL(scale, cuda) { op.Impl("cuda", Scale, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
