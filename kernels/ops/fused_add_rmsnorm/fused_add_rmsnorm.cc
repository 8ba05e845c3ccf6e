// fused_add_rmsnorm: residual += x; x = rmsnorm(residual), in place.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/rmsnorm_reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(fused_add_rmsnorm) {
  OpDef op("fused_add_rmsnorm");
  op.Doc(
        "The pre-norm residual step, in place on both inputs: s = x + residual; "
        "residual = s; x = s * rsqrt(mean(s^2) + eps) * (weight + weight_bias). Accumulate in "
        "float32, round once to the output dtype. As in FlashInfer's FusedAddRMSNorm, s is "
        "kept in float32: residual receives s rounded to the dtype, while the norm (and x) is "
        "computed from the unrounded float32 s, so x is rounded exactly once.")
      .Input("x", kFloatingTypes, "[num_tokens, hidden_size]", "contiguous")
      .Input("residual", kFloatingTypes, "[num_tokens, hidden_size]", "x's dtype, contiguous")
      .Input("weight", kFloatingTypes, "[hidden_size]", "x's dtype")
      .Output("x", SameAs("x"), "rmsnorm(x + residual), written over x")
      .Output("residual", SameAs("residual"), "x + residual, written over residual")
      .InPlace("x", "x")
      .InPlace("residual", "residual")
      .SameDType("x", "residual")
      .SameDType("x", "weight")
      .AttrWithDefault("eps", AttrType::kFloat, 1e-6, "added to mean(s^2) before the rsqrt")
      .AttrWithDefault("weight_bias", AttrType::kFloat, 0.0,
                       "added to weight (1.0 for Gemma's (1 + weight))");
  op.Reference(
      [](const HostTensors& in, const AttrMap& attrs, HostTensors* out, std::string* error) {
        return RmsNormReference("fused_add_rmsnorm", true, in, attrs, out, error);
      });
  op.Bench(
      {[](int64_t t, int64_t h) {
         return std::map<std::string, Shape>{{"x", {t, h}}, {"residual", {t, h}}, {"weight", {h}}};
       },
       {}});
  return op;
}

}  // namespace kerneld
