// top_k_renorm_probs, CUDA binding: the top-k launcher of
// ops/top_k_mask_logits/cuda.cuh (the same select) in kRenorm mode, and the
// impl's registration.
#include "kerneld/op.h"
#include "ops/top_k_mask_logits/cuda_binding.cuh"

namespace kerneld::cuda {

namespace {

Status TopKRenormProbs(KernelContext& ctx) {
  return top_k::RunTopK<top_k::Mode::kRenorm>(ctx, "top_k_renorm_probs");
}

}  // namespace

KERNELD_IMPL(top_k_renorm_probs, cuda) {
  op.Impl("cuda", TopKRenormProbs, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
