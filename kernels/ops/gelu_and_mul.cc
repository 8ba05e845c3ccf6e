// gelu_and_mul: y = gelu(x[..., :d]) * x[..., d:], the gated MLP activation.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(gelu_and_mul) {
  OpDef op("gelu_and_mul");
  op.Doc("Gated activation: x's last dim holds [gate | up], y = gelu(gate) * up with the "
         "exact (erf) GELU gelu(a) = 0.5 * a * (1 + erf(a / sqrt(2))), evaluated as "
         "0.5 * a * erfc(-a / sqrt(2)) to avoid cancellation for negative a. Accumulate in "
         "float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved")
      .Impl("cpu", cpu::GeluAndMul, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::GeluAndMul, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
