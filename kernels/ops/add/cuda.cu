// add, CUDA binding: adapts the KernelContext to the launcher in cuda.cuh
// and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/add/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status Add(KernelContext& ctx) {
  const TensorView& a = ctx.input("a");
  const TensorView& b = ctx.input("b");
  TensorView& y = ctx.output("y");
  const int64_t n = a.numel();
  if (n == 0) return Status::Ok();
  return DispatchFloatingCuda(a.dtype, "add", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        add::Add<T>(a.ptr<T>(), b.ptr<T>(), y.ptr<T>(), n, ctx.device.sm_count, StreamOf(ctx)),
        "add");
  });
}

}  // namespace

KERNELD_IMPL(add, cuda) { op.Impl("cuda", Add, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
