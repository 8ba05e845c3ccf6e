// gelu_and_mul: y = gelu(x[..., :d]) * x[..., d:], the gated MLP activation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/act_and_mul_bench.h"
#include "common/act_and_mul_reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(gelu_and_mul) {
  OpDef op("gelu_and_mul");
  op.Doc(
        "Gated activation: x's last dim holds [gate | up], y = gelu(gate) * up with the "
        "exact (erf) GELU gelu(a) = 0.5 * a * (1 + erf(a / sqrt(2))), evaluated as "
        "0.5 * a * erfc(-a / sqrt(2)) to avoid cancellation for negative a. Accumulate in "
        "float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved");
  op.Reference([](const HostTensors& in, const AttrMap&, HostTensors* out, std::string* error) {
    return ActAndMulReference("gelu_and_mul", in, out, error, [](double a) {
      return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
    });
  });
  op.Bench(ActAndMulBench());
  return op;
}

}  // namespace kerneld
