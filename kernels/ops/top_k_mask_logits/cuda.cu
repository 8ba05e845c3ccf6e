// top_k_mask_logits, CUDA binding: the shared top-k launcher (cuda.cuh:
// register-cached rows, split over a cluster at decode shapes, or streamed)
// in kMask mode, and the impl's registration.
#include "kerneld/op.h"
#include "ops/top_k_mask_logits/cuda_binding.cuh"

namespace kerneld::cuda {

namespace {

Status TopKMaskLogits(KernelContext& ctx) {
  return top_k::RunTopK<top_k::Mode::kMask>(ctx, "top_k_mask_logits");
}

}  // namespace

KERNELD_IMPL(top_k_mask_logits, cuda) {
  op.Impl("cuda", TopKMaskLogits, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
