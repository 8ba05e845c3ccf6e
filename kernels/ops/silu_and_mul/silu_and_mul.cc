// silu_and_mul: y = silu(x[..., :d]) * x[..., d:], the gated MLP activation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/act_and_mul_bench.h"
#include "common/act_and_mul_reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(silu_and_mul) {
  OpDef op("silu_and_mul");
  op.Doc(
        "Gated activation: x's last dim holds [gate | up], y = silu(gate) * up with "
        "silu(a) = a / (1 + exp(-a)). Accumulate in float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved");
  op.Reference([](const HostTensors& in, const AttrMap&, HostTensors* out, std::string* error) {
    return ActAndMulReference("silu_and_mul", in, out, error,
                              [](double a) { return a / (1.0 + std::exp(-a)); });
  });
  op.Bench(ActAndMulBench());
  return op;
}

}  // namespace kerneld
