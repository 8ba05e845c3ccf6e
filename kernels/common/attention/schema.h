// Schema pieces the attention ops share: the head and indptr checks that
// shape patterns cannot say, the scale's default, and the doc text of the
// attrs (one wording for every op).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "kerneld/op.h"

namespace kerneld::attention {

inline constexpr const char* kSmScaleDoc = "scale of q . k; 0 (the default) means 1/sqrt(head_dim)";
inline constexpr const char* kSoftCapDoc =
    "c > 0: each logit x becomes c * tanh(x / c) (Gemma-2); 0: off";
inline constexpr const char* kCausalDoc =
    "query i of a request (of qo_len) sees key j only if j <= i + kv_len - qo_len (the mask "
    "aligned to the bottom right, as in FlashInfer)";
inline constexpr const char* kLseDoc =
    "float32 natural log of the sum of exp of the scaled (capped) logits; -inf where a row sees "
    "no key";

// The symbol's value, or -1 when the schema did not bind it.
inline int64_t Sym(const ShapeBindings& b, const char* s) {
  auto it = b.symbols.find(s);
  return it == b.symbols.end() ? -1 : it->second;
}

// num_qo_heads a multiple of num_kv_heads (query head h reads kv head
// h / (num_qo_heads / num_kv_heads)); page_size >= 1 where there is one.
inline Status CheckHeads(const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                         ShapeBindings* bind) {
  const int64_t hq = Sym(*bind, "num_qo_heads"), hkv = Sym(*bind, "num_kv_heads");
  if (hkv < 1)
    return InvalidArgument(op.name + ": dim 'num_kv_heads' is 0, expected at least one kv head");
  if (hq >= 0 && hq % hkv != 0)
    return InvalidArgument(op.name + ": 'q' dim 1 ('num_qo_heads'): expected a multiple of " +
                           "num_kv_heads=" + std::to_string(hkv) + ", got " + std::to_string(hq));
  if (const int64_t ps = Sym(*bind, "page_size"); ps == 0)
    return InvalidArgument(op.name + ": 'k_cache' dim 1 ('page_size'): expected at least 1, got 0");
  return Status::Ok();
}

// The indptrs have batch + 1 entries (batch bound by another input), or at
// least one (a ragged batch is indptr_len - 1).
inline Status CheckIndptrLen(const OpDef& op, const std::vector<TensorView>&, const AttrMap&,
                             ShapeBindings* bind) {
  const int64_t n = Sym(*bind, "indptr_len"), batch = Sym(*bind, "batch");
  const char* name = op.InputIndex("qo_indptr") >= 0 ? "qo_indptr" : "kv_indptr";
  if (batch >= 0 && n != batch + 1)
    return InvalidArgument(op.name + ": '" + name +
                           "' dim 0 ('indptr_len'): expected batch + 1 = " +
                           std::to_string(batch + 1) + ", got " + std::to_string(n));
  if (n < 1)
    return InvalidArgument(op.name + ": '" + name +
                           "' dim 0 ('indptr_len'): expected batch + 1 >= 1, got 0");
  return Status::Ok();
}

// sm_scale as the kernels see it (a float).
inline float SmScale(double attr, int64_t head_dim) {
  if (attr != 0) return static_cast<float>(attr);
  return head_dim > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))) : 1.0f;
}

// Adds sm_scale and logits_soft_cap (and causal for prefill) to an op.
inline void AddScoreAttrs(OpDef& op, bool causal) {
  if (causal) op.AttrWithDefault("causal", AttrType::kBool, false, kCausalDoc);
  op.AttrWithDefault("sm_scale", AttrType::kFloat, 0.0, kSmScaleDoc)
      .AttrWithDefault("logits_soft_cap", AttrType::kFloat, 0.0, kSoftCapDoc);
}

}  // namespace kerneld::attention
