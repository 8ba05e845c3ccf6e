// gelu_tanh_and_mul: y = gelu_tanh(x[..., :d]) * x[..., d:], the gated MLP activation.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/act_and_mul_bench.h"
#include "common/act_and_mul_reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(gelu_tanh_and_mul) {
  OpDef op("gelu_tanh_and_mul");
  op.Doc(
        "Gated activation: x's last dim holds [gate | up], y = gelu_tanh(gate) * up with "
        "gelu_tanh(a) = 0.5 * a * (1 + tanh(u)), u = sqrt(2 / pi) * (a + 0.044715 * a^3), "
        "evaluated as a / (1 + exp(-2u)) to avoid cancellation for negative u. Accumulate in "
        "float32, round once to the output dtype.")
      .Input("x", kFloatingTypes, "[..., 2*d]", "gate and up halves, contiguous")
      .Output("y", ShapeOf("[..., d]", "x"), "x's dtype, last dim halved");
  op.Reference([](const HostTensors& in, const AttrMap&, HostTensors* out, std::string* error) {
    return ActAndMulReference("gelu_tanh_and_mul", in, out, error, [](double a) {
      const double k = std::sqrt(2.0 / 3.14159265358979323846);  // sqrt(2 / pi)
      return 0.5 * a * (1.0 + std::tanh(k * (a + 0.044715 * a * a * a)));
    });
  });
  op.Bench(ActAndMulBench());
  return op;
}

}  // namespace kerneld
