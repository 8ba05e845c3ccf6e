// gelu_tanh_and_mul: y = gelu_tanh(x[..., :d]) * x[..., d:], the gated MLP activation.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(gelu_tanh_and_mul) {
  OpDef op("gelu_tanh_and_mul");
  op.Doc("Gated activation: x's last dim holds [gate | up], y = gelu_tanh(gate) * up with "
         "gelu_tanh(a) = 0.5 * a * (1 + tanh(u)), u = sqrt(2 / pi) * (a + 0.044715 * a^3), "
         "evaluated as a / (1 + exp(-2u)) to avoid cancellation for negative u. Accumulate in "
         "float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved")
      .Impl("cpu", cpu::GeluTanhAndMul, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::GeluTanhAndMul, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
