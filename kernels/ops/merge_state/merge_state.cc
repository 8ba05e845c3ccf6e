// merge_state: two partial attentions over disjoint keys merged into the
// attention over their union (FlashInfer's cascade merge_state).
#include <map>
#include <string>

#include "common/attention/bench.h"
#include "common/attention/reference.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(merge_state) {
  OpDef op("merge_state");
  op.Doc(
        "Given (v_a, s_a) and (v_b, s_b), the outputs and float32 natural-log lse of two "
        "attentions over disjoint key sets, the attention over their union: s = log(exp(s_a) + "
        "exp(s_b)), v = v_a * exp(s_a - s) + v_b * exp(s_b - s). A side with s = -inf is empty "
        "(both empty: v = 0, s = -inf). Computed in float32, rounded once to v_a's dtype. v may "
        "alias v_a and s may alias s_a.")
      .Input("v_a", kFloatingTypes, "[..., num_heads, head_dim]", "first partial output")
      .Input("s_a", {DType::kFloat32}, "[..., num_heads]", "its lse (natural log)")
      .Input("v_b", kFloatingTypes, "[..., num_heads, head_dim]", "second partial output")
      .Input("s_b", {DType::kFloat32}, "[..., num_heads]", "its lse (natural log)")
      .SameDType("v_a", "v_b")
      .Output("v", SameAs("v_a"), "v_a's dtype and shape")
      .MayAlias("v", "v_a")
      .Output("s", SameAs("s_a"), "float32, s_a's shape")
      .MayAlias("s", "s_a");
  op.Reference(attention::MergeReference);
  op.Bench(attention::MergeBench());
  return op;
}

}  // namespace kerneld
