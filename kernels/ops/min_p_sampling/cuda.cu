// min_p_sampling, CUDA binding: adapts the KernelContext to the launcher in
// cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"
#include "ops/min_p_sampling/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status MinPSampling(KernelContext& ctx) {
  const TensorView& probs = ctx.input("probs");
  TensorView& out = ctx.output("samples");
  return CudaStatus(
      min_p::MinPSampling(probs.ptr<float>(), out.ptr<int32_t>(), probs.dim(0), probs.dim(1),
                          static_cast<float>(ctx.attr_f("min_p")),
                          static_cast<unsigned long long>(ctx.attr_i("seed")), StreamOf(ctx)),
      "min_p_sampling");
}

}  // namespace

KERNELD_IMPL(min_p_sampling, cuda) {
  op.Impl("cuda", MinPSampling, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
