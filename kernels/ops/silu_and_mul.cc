// silu_and_mul: y = silu(x[..., :d]) * x[..., d:], the gated MLP activation.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(silu_and_mul) {
  OpDef op("silu_and_mul");
  op.Doc("Gated activation: x's last dim holds [gate | up], y = silu(gate) * up with "
         "silu(a) = a / (1 + exp(-a)). Accumulate in float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved")
      .Impl("cpu", cpu::SiluAndMul, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::SiluAndMul, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
