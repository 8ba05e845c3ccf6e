// The CUDA binding shared by top_k_mask_logits and top_k_renorm_probs:
// adapts the KernelContext (input x, 'top_k', output y) to the launcher in
// cuda.cuh.
#pragma once

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "common/top_k.h"
#include "kerneld/op.h"
#include "ops/top_k_mask_logits/cuda.cuh"

namespace kerneld::cuda::top_k {

template <Mode kMode>
Status RunTopK(KernelContext& ctx, const char* op) {
  const TensorView& x = ctx.input(ctx.op->inputs[0].name);
  const TensorView& k = ctx.input("top_k");
  TensorView& y = ctx.output(ctx.op->outputs[0].name);
  DeviceCaps dev;
  dev.index = ctx.device.device.index;
  dev.compute_capability = ctx.device.compute_capability;
  dev.sm_count = ctx.device.sm_count;
  return DispatchFloatingCuda(x.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(
        TopK<kMode, T>(static_cast<const T*>(x.raw()), static_cast<T*>(y.raw()), k.raw(),
                       k.dtype == DType::kInt64, kerneld::top_k::KStride(k.shape), x.dim(0),
                       x.dim(1), dev, StreamOf(ctx)),
        op);
  });
}

}  // namespace kerneld::cuda::top_k
