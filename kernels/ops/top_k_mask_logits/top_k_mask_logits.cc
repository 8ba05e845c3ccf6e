// top_k_mask_logits: each row's logits outside its top k set to -inf (the
// top-k filter before a softmax), FlashInfer's sampling.top_k_mask_logits.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/top_k.h"
#include "kerneld/op.h"
#include "kerneld/reference.h"

namespace kerneld {

namespace {

bool TopKMaskLogitsReference(const HostTensors& in, const AttrMap&, HostTensors* out,
                             std::string* error) {
  std::vector<double> t;
  if (!top_k::RefThresholds(in, "logits", "top_k_mask_logits", false, &t, error)) return false;
  HostTensor y = in.at("logits");
  const int64_t v = y.shape[1];
  for (size_t i = 0; i < y.values.size(); ++i)
    if (!(y.values[i] >= t[i / static_cast<size_t>(v)])) y.values[i] = -INFINITY;
  (*out)["masked_logits"] = std::move(y);
  return true;
}

}  // namespace

KERNELD_OP(top_k_mask_logits) {
  OpDef op("top_k_mask_logits");
  op.Doc(
        "masked_logits[b, j] = logits[b, j] when it is >= the k-th largest value of row b, else "
        "-inf (k = top_k[b], or top_k for every row when it is one value). Ties at the boundary "
        "are kept, so a row may keep more than k values; k <= 0 or k >= vocab keeps the whole "
        "row. Exact: kept values are copied, in logits' dtype. -0 equals +0. The cpu backend "
        "rejects a NaN logit (INVALID_ARGUMENT); the cuda backend ranks NaN below -inf (masked "
        "unless the row keeps everything). As FlashInfer's sampling.top_k_mask_logits.")
      .Input("logits", kFloatingTypes, "[batch, vocab]", "any vocab size (odd ones too)")
      .Input("top_k", {DType::kInt32, DType::kInt64}, "[...]",
             "[] or [1]: one k for every row; [batch]: a k per row")
      .Gen(InputGen::kIndex, "vocab")
      .GenShape("[batch]")
      .Check(top_k::CheckTopKInput)
      .Output("masked_logits", SameAs("logits"), "logits' dtype and shape")
      .MayAlias("masked_logits", "logits");
  op.Reference(TopKMaskLogitsReference);
  BenchSpec bench;
  bench.shapes = [](int64_t t, int64_t h) {
    return std::map<std::string, Shape>{{"logits", {t, h}}, {"top_k", {t}}};
  };
  bench.lo = -8;
  bench.hi = 8;
  // Decode batches (1-64 rows) over LLM vocabularies (32k-128k), where
  // FlashInfer's kernel is the comparison.
  bench.extra = {{"v32k1", 1, 32000},   {"v32k", 16, 32000},   {"v32k64", 64, 32000},
                 {"v128k1", 1, 128256}, {"v128k", 16, 128256}, {"v128k64", 64, 128256}};
  op.Bench(std::move(bench));
  return op;
}

}  // namespace kerneld
