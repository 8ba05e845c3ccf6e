// top_k_top_p_sampling: one token per row from the top-k / top-p support.
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "common/sampling_schema.h"
#include "kerneld/op.h"

namespace kerneld {

namespace {

Status CheckSamplingAttrs(const OpDef& op, const std::vector<TensorView>&, const AttrMap& attrs,
                          ShapeBindings* bind) {
  if (auto it = attrs.find("top_k"); it != attrs.end() && std::get<int64_t>(it->second) < 0)
    return InvalidArgument(op.name + ": attr 'top_k' must be >= 0 (0 turns it off), got " +
                           AttrValueToString(it->second));
  if (auto it = attrs.find("top_p"); it != attrs.end()) {
    const double p = std::get<double>(it->second);
    if (!(p > 0 && p <= 1))
      return InvalidArgument(op.name + ": attr 'top_p' must be in (0, 1] (1 turns it off), got " +
                             AttrValueToString(it->second));
  }
  return CheckSamplingVocab(op, *bind);
}

}  // namespace

KERNELD_OP(top_k_top_p_sampling) {
  OpDef op("top_k_top_p_sampling");
  op.Doc(
        "samples[b] = a token drawn from probs[b, :] restricted to the top-k and top-p "
        "support and renormalized. Token j is in the support when p_j > 0, fewer than top_k "
        "tokens have a larger probability (top_k = 0: off) and the tokens with a larger "
        "probability hold less than top_p of the row's mass (top_p = 1: off); ties at the "
        "boundary are kept. Rows need not sum to 1. Deterministic: the same probs, attrs and "
        "seed give the same samples on a backend (cpu and cuda draw differently). The cpu "
        "backend rejects a negative or non-finite probability or a row without mass "
        "(INVALID_ARGUMENT); the cuda backend ignores negative values and writes -1 for a row "
        "without positive finite mass.")
      .Input("probs", {DType::kFloat32}, "[batch, vocab]", "float32, non-negative")
      .Gen(InputGen::kProbabilities)
      .Check(CheckSamplingAttrs)
      .Output("samples", ShapeOf("[batch]", DType::kInt32), "int32 token index per row")
      .AttrWithDefault("top_k", AttrType::kInt, int64_t{0}, "keep the k most likely tokens; 0: off")
      .AttrWithDefault("top_p", AttrType::kFloat, 1.0,
                       "keep the smallest head holding this mass; 1: off")
      .AttrWithDefault("seed", AttrType::kInt, int64_t{0},
                       "random seed; row b uses stream (seed, b)");
  op.Bench(SamplingBench({{"top_k", int64_t{50}}, {"top_p", 0.9}, {"seed", int64_t{1}}}));
  return op;
}

}  // namespace kerneld
