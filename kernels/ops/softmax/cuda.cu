// softmax, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh (per-row or split-row kernels, chosen there) and registers the
// impl. The output is float32 whatever the logits' dtype.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/softmax/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status Softmax(KernelContext& ctx) {
  const TensorView& x = ctx.input("logits");
  TensorView& y = ctx.output("probs");
  if (x.numel() == 0) return Status::Ok();
  const float scale = static_cast<float>(1.0 / ctx.attr_f("temperature"));
  softmax::DeviceCaps dev;
  dev.index = ctx.device.device.index;
  dev.compute_capability = ctx.device.compute_capability;
  dev.sm_count = ctx.device.sm_count;
  return DispatchFloatingCuda(x.dtype, "softmax", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(softmax::Softmax<T, float>(static_cast<const T*>(x.raw()), y.ptr<float>(),
                                                 x.dim(0), x.dim(1), scale, dev, StreamOf(ctx)),
                      "softmax");
  });
}

}  // namespace

KERNELD_IMPL(softmax, cuda) { op.Impl("cuda", Softmax, Requirements::Cuda(70), kPriorityDevice); }

}  // namespace kerneld::cuda
