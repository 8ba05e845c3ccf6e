// top_k_renorm_probs: each row's probabilities restricted to its top k and
// renormalized (the top-k filter of sampling), FlashInfer's
// sampling.top_k_renorm_probs.
#include <map>
#include <string>
#include <vector>

#include "common/top_k.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

bool TopKRenormProbsReference(const HostTensors& in, const AttrMap&, HostTensors* out,
                              std::string* error) {
  std::vector<double> t;
  if (!top_k::RefThresholds(in, "probs", "top_k_renorm_probs", true, &t, error)) return false;
  HostTensor y = in.at("probs");
  const auto v = static_cast<size_t>(y.shape[1]);
  for (size_t r = 0; r < t.size(); ++r) {
    double* row = y.values.data() + r * v;
    double kept = 0;
    for (size_t i = 0; i < v; ++i) kept += row[i] >= t[r] ? row[i] : 0;
    for (size_t i = 0; i < v; ++i)
      row[i] = row[i] >= t[r] && kept > 0 ? RoundTo(y.dtype, row[i] / kept) : 0;
  }
  (*out)["renorm_probs"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(top_k_renorm_probs) {
  OpDef op("top_k_renorm_probs");
  op.Doc(
        "renorm_probs[b, j] = probs[b, j] / S_b when probs[b, j] is >= the k-th largest value "
        "of row b, else 0, where S_b is the sum of the kept values (k = top_k[b], or top_k for "
        "every row when it is one value). Ties at the boundary are kept, so a row may keep more "
        "than k values; k <= 0 or k >= vocab keeps the whole row (renormalized). Rows need not "
        "sum to 1; a row whose kept mass is 0 comes out all 0. Summed in float32 (cuda) or "
        "float64 (cpu), rounded once to probs' dtype. The cpu backend rejects a negative or "
        "non-finite probability (INVALID_ARGUMENT). As FlashInfer's "
        "sampling.top_k_renorm_probs.")
      .Input("probs", kFloatingTypes, "[batch, vocab]", "non-negative; any vocab size")
      .Gen(InputGen::kProbabilities)
      .Input("top_k", {DType::kInt32, DType::kInt64}, "[...]",
             "[] or [1]: one k for every row; [batch]: a k per row")
      .Gen(InputGen::kIndex, "vocab")
      .GenShape("[batch]")
      .Check(top_k::CheckTopKInput)
      .Output("renorm_probs", SameAs("probs"), "probs' dtype and shape")
      .MayAlias("renorm_probs", "probs");
  op.Reference(TopKRenormProbsReference);
  BenchSpec bench;
  bench.shapes = [](int64_t t, int64_t h) {
    return std::map<std::string, Shape>{{"probs", {t, h}}, {"top_k", {t}}};
  };
  bench.lo = 0.5;  // probabilities around 1 / vocab
  bench.hi = 1.5;
  bench.range_per_hidden = true;
  bench.extra = {{"v32k1", 1, 32000},   {"v32k", 16, 32000},   {"v32k64", 64, 32000},
                 {"v128k1", 1, 128256}, {"v128k", 16, 128256}, {"v128k64", 64, 128256}};
  op.Bench(std::move(bench));
  return op;
}

}  // namespace kerneld
