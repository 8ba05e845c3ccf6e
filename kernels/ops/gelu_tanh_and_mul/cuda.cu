// gelu_tanh_and_mul, CUDA: y = act(gate) * up in float32, rounded once
// (common/cuda/act_and_mul.cuh).
#include "common/cuda/act_and_mul.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

KERNELD_IMPL(gelu_tanh_and_mul, cuda) {
  op.Impl(
      "cuda",
      [](KernelContext& ctx) { return ActAndMul(ctx, "gelu_tanh_and_mul", act::GeluTanh{}); },
      Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
