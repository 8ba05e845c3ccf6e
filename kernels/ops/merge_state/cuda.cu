// merge_state, CUDA binding: adapts the KernelContext to cuda.cuh.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/merge_state/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status MergeState(KernelContext& ctx) {
  const TensorView& va = ctx.input("v_a");
  const int64_t rows = ctx.input("s_a").numel();
  const int64_t d = va.dim(-1);
  return DispatchFloatingCuda(va.dtype, "merge_state", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(merge::MergeState<T>(va.ptr<T>(), ctx.input("s_a").ptr<float>(),
                                           ctx.input("v_b").ptr<T>(), ctx.input("s_b").ptr<float>(),
                                           ctx.output("v").ptr<T>(), ctx.output("s").ptr<float>(),
                                           rows, d, ctx.device.sm_count, StreamOf(ctx)),
                      "merge_state");
  });
}

}  // namespace

KERNELD_IMPL(merge_state, cuda) {
  op.Impl("cuda", MergeState, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
