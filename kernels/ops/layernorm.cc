// layernorm: y = (x - mean) * rsqrt(var + eps) * gamma + beta, per row.
#include "cpu/cpu_kernels.h"
#include "cuda/cuda_kernels.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(layernorm) {
  OpDef op("layernorm");
  op.Doc("Layer norm over the last dim: y = (x - mean(x)) * rsqrt(var(x) + eps) * gamma + beta, "
         "var the biased (population) variance, computed from the centred values. Accumulate "
         "in float32, round once to the output dtype. y may alias x (in place).")
      .Input("x", kFloatingTypes, "[..., hidden_size]", "rows of hidden_size, contiguous")
      .Input("gamma", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Input("beta", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Output("y", SameAs("x"), "x's dtype and shape")
      .MayAlias("y", "x")
      .SameDType("x", "gamma")
      .SameDType("x", "beta")
      .AttrWithDefault("eps", AttrType::kFloat, 1e-5, "added to the variance before the rsqrt")
      .Impl("cpu", cpu::LayerNorm, Requirements::Cpu());
#ifdef KERNELD_WITH_CUDA
  op.Impl("cuda", cuda::LayerNorm, Requirements::Cuda(70), 10);
#endif
  return op;
}

}  // namespace kerneld
