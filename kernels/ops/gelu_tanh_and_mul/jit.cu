// gelu_tanh_and_mul, JIT form (the nvrtc backend, docs/jit.md): the gated activations'
// kernel of cuda.cuh with this op's activation, launched with the AOT plan
// (common/cuda/act_and_mul_jit.cuh).
#include "common/cuda/act_and_mul_jit.cuh"
#include "ops/gelu_tanh_and_mul/cuda.cuh"

namespace kerneld::cuda {

KERNELD_IMPL(gelu_tanh_and_mul, nvrtc) {
  RegisterJitImpl(op, "ops/gelu_tanh_and_mul/cuda.cuh",
                  ActAndMulJitPlan("ops/gelu_tanh_and_mul/cuda.cuh",
                                   [](DType) { return std::string("kerneld::act::GeluTanh"); }));
}

}  // namespace kerneld::cuda
