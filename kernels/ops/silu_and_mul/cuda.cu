// silu_and_mul, CUDA binding: the launcher in cuda.cuh behind the gated
// activations' binding (common/cuda/act_and_mul_binding.cuh).
#include "common/cuda/act_and_mul_binding.cuh"
#include "kerneld/op.h"
#include "ops/silu_and_mul/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status SiluAndMul(KernelContext& ctx) {
  return BindActAndMul(ctx, "silu_and_mul",
                       [](const auto* x, auto* y, int64_t rows, int64_t d, cudaStream_t s) {
                         return silu_and_mul::SiluAndMul(x, y, rows, d, s);
                       });
}

}  // namespace

KERNELD_IMPL(silu_and_mul, cuda) {
  op.Impl("cuda", SiluAndMul, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
