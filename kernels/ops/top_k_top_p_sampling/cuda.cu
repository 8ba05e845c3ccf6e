// top_k_top_p_sampling, CUDA binding: adapts the KernelContext to the
// launcher in cuda.cuh and registers the impl.
#include "common/cuda/cuda_check.cuh"
#include "kerneld/op.h"
#include "ops/top_k_top_p_sampling/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status TopKTopPSampling(KernelContext& ctx) {
  const TensorView& probs = ctx.input("probs");
  TensorView& out = ctx.output("samples");
  return CudaStatus(top_k_top_p::TopKTopPSampling(
                        probs.ptr<float>(), out.ptr<int32_t>(), probs.dim(0), probs.dim(1),
                        ctx.attr_i("top_k"), static_cast<float>(ctx.attr_f("top_p")),
                        static_cast<unsigned long long>(ctx.attr_i("seed")), StreamOf(ctx)),
                    "top_k_top_p_sampling");
}

}  // namespace

KERNELD_IMPL(top_k_top_p_sampling, cuda) {
  op.Impl("cuda", TopKTopPSampling, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
