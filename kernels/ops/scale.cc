// scale: y = x * factor, element-wise.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(scale) {
  OpDef op("scale");
  op.Doc("y = x * factor, element-wise. Computed in float32 and rounded once to x's dtype "
         "(round to nearest even). y may alias x (in place).")
      .Input("x", kFloatingTypes, "[...]", "any shape, contiguous")
      .Output("y", SameAs("x"), "x's dtype and shape")
      .MayAlias("y", "x")
      .Attr("factor", AttrType::kFloat, "the multiplier")
      .Impl("cpu", cpu::Scale, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::Scale, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
