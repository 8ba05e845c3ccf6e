// min_p_sampling: one token per row from the tokens whose probability is at
// least min_p times the row's largest (the min-p filter of LLM serving).
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "common/sampling_schema.h"
#include "kerneld/op.h"

namespace kerneld {

namespace {

Status CheckMinPAttrs(const OpDef& op, const std::vector<TensorView>&, const AttrMap& attrs,
                      ShapeBindings* bind) {
  if (auto it = attrs.find("min_p"); it != attrs.end()) {
    const double p = std::get<double>(it->second);
    if (!(p >= 0 && p <= 1))
      return InvalidArgument(op.name + ": attr 'min_p' must be in [0, 1] (0 turns it off), got " +
                             AttrValueToString(it->second));
  }
  return CheckSamplingVocab(op, *bind);
}

}  // namespace

KERNELD_OP(min_p_sampling) {
  OpDef op("min_p_sampling");
  op.Doc(
        "samples[b] = a token drawn from probs[b, :] restricted to the min-p support and "
        "renormalized. Token j is in the support when p_j > 0 and p_j >= min_p * max(probs[b, :]) "
        "(the threshold computed in float32; min_p = 0: every positive token). Rows need not sum "
        "to 1. Deterministic: the same probs, attrs and seed give the same samples on a backend "
        "(cpu and cuda draw differently; row b uses stream (seed, b), as top_k_top_p_sampling). "
        "The cpu backend rejects a negative or non-finite probability or a row without mass "
        "(INVALID_ARGUMENT); the cuda backend ignores negative values and writes -1 for a row "
        "without positive finite mass.")
      .Input("probs", {DType::kFloat32}, "[batch, vocab]", "float32, non-negative")
      .Gen(InputGen::kProbabilities)
      .Check(CheckMinPAttrs)
      .Output("samples", ShapeOf("[batch]", DType::kInt32), "int32 token index per row")
      .Attr("min_p", AttrType::kFloat, "keep tokens with p >= min_p * the row's max; in [0, 1]")
      .AttrWithDefault("seed", AttrType::kInt, int64_t{0},
                       "random seed; row b uses stream (seed, b)");
  // Random: no float64 reference; the tests check support and distribution.
  op.Bench(SamplingBench({{"min_p", 0.1}, {"seed", int64_t{1}}}));
  return op;
}

}  // namespace kerneld
