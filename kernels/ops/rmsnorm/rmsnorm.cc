// rmsnorm: y = x * rsqrt(mean(x^2) + eps) * (weight + weight_bias), per row.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/rmsnorm_reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(rmsnorm) {
  OpDef op("rmsnorm");
  op.Doc(
        "Root-mean-square norm over the last dim: y = x * rsqrt(mean(x^2) + eps) * "
        "(weight + weight_bias). Accumulate in float32, round once to the output dtype "
        "(the weight multiply is in float32 too, FlashInfer's order). weight_bias = 1 gives "
        "Gemma's (1 + weight). y may alias x (in place).")
      .Input("x", kFloatingTypes, "[..., hidden_size]", "rows of hidden_size, contiguous")
      .Input("weight", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Output("y", SameAs("x"), "x's dtype and shape")
      .MayAlias("y", "x")
      .SameDType("x", "weight")
      .AttrWithDefault("eps", AttrType::kFloat, 1e-6, "added to mean(x^2) before the rsqrt")
      .AttrWithDefault("weight_bias", AttrType::kFloat, 0.0,
                       "added to weight (1.0 for Gemma's (1 + weight))");
  op.Reference(
      [](const HostTensors& in, const AttrMap& attrs, HostTensors* out, std::string* error) {
        return RmsNormReference("rmsnorm", false, in, attrs, out, error);
      });
  op.Bench({[](int64_t t, int64_t h) {
              return std::map<std::string, Shape>{{"x", {t, h}}, {"weight", {h}}};
            },
            {}});
  return op;
}

}  // namespace kerneld
