// layernorm, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"
#include "ops/layernorm/args.h"
#include "ops/layernorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status LayerNorm(KernelContext& ctx) {
  const ::kerneld::layernorm::LayerNormArgs a = ::kerneld::layernorm::LayerNormArgsOf(ctx);
  const RowShape r = RowsOf(a.x);
  if (r.rows == 0) return Status::Ok();
  return DispatchFloatingCuda(a.x.dtype, "layernorm", [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(layernorm::LayerNorm<T>(a.x.ptr<T>(), a.gamma.ptr<T>(), a.beta.ptr<T>(),
                                              a.y.ptr<T>(), r.rows, r.h, a.eps, ctx.device.sm_count,
                                              ctx.device.compute_capability, StreamOf(ctx)),
                      "layernorm");
  });
}

}  // namespace

KERNELD_IMPL(layernorm, cuda) {
  op.Impl("cuda", LayerNorm, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
