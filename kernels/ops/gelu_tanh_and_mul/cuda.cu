// gelu_tanh_and_mul, CUDA binding: the launcher in cuda.cuh behind the gated
// activations' binding (common/cuda/act_and_mul_binding.cuh).
#include "common/cuda/act_and_mul_binding.cuh"
#include "kerneld/op.h"
#include "ops/gelu_tanh_and_mul/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status GeluTanhAndMul(KernelContext& ctx) {
  return BindActAndMul(ctx, "gelu_tanh_and_mul",
                       [](const auto* x, auto* y, int64_t rows, int64_t d, cudaStream_t s) {
                         return gelu_tanh_and_mul::GeluTanhAndMul(x, y, rows, d, s);
                       });
}

}  // namespace

KERNELD_IMPL(gelu_tanh_and_mul, cuda) {
  op.Impl("cuda", GeluTanhAndMul, Requirements::Cuda(70), kPriorityDevice);
}

}  // namespace kerneld::cuda
