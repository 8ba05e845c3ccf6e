// silu_and_mul, CUDA: y = act(gate) * up in float32, rounded once (common/cuda/act_and_mul.cuh).
#include "common/cuda/act_and_mul.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

KERNELD_IMPL(silu_and_mul, cuda) {
  op.Impl(
      "cuda", [](KernelContext& ctx) { return ActAndMul(ctx, "silu_and_mul", act::Silu{}); },
      Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
