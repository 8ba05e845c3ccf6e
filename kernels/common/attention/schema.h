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

// q and qo_indptr, as both prefills declare them first (clients generate
// four requests).
inline void AddPrefillQuery(OpDef& op) {
  op.Input("q", kFloatingTypes, "[nnz_q, num_qo_heads, head_dim]", "the requests' query rows")
      .Input("qo_indptr", {DType::kInt32}, "[indptr_len]",
             "batch + 1 entries: request b's rows are q[qo_indptr[b]:qo_indptr[b+1]]")
      .Gen(InputGen::kIndptr, "nnz_q")
      .GenShape("[4]");
}

// The shapes clients generate for a paged cache's inputs (InputDef::
// gen_shape); "": the input's own rule.
struct PagedGenShapes {
  const char* cache = "";
  const char* indptr = "";
  const char* indices = "";
  const char* last = "";
};

// k_cache, v_cache, kv_indptr, kv_indices and kv_last_page_len, in that
// order, as decode and the paged prefill declare them (q's dtype).
inline void AddPagedCacheInputs(OpDef& op, const PagedGenShapes& gen) {
  auto gen_shape = [&op](const char* pattern) {
    if (*pattern != '\0') op.GenShape(pattern);
  };
  op.Input("k_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
           "key pages (NHD), q's dtype");
  gen_shape(gen.cache);
  op.Input("v_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
           "value pages (NHD), q's dtype")
      .Input("kv_indptr", {DType::kInt32}, "[indptr_len]",
             "batch + 1 entries: request b's pages are kv_indices[kv_indptr[b]:kv_indptr[b+1]]")
      .Gen(InputGen::kIndptr, "nnz_pages");
  gen_shape(gen.indptr);
  op.Input("kv_indices", {DType::kInt32}, "[nnz_pages]", "page numbers in [0, max_pages)")
      .Gen(InputGen::kPermutation, "max_pages");
  gen_shape(gen.indices);
  op.Input("kv_last_page_len", {DType::kInt32}, "[batch]",
           "entries in each request's last page, in [1, page_size]")
      .Gen(InputGen::kLength, "page_size");
  gen_shape(gen.last);
}

// What follows the inputs of decode and the prefills: q's dtype for the
// keys and values (`k`, `v`), the head and indptr checks, o and lse (of
// lse_shape), and the score attrs (with causal for a prefill).
inline void AddAttendOutputs(OpDef& op, const char* k, const char* v, const char* lse_shape,
                             bool causal) {
  op.SameDType("q", k)
      .SameDType("q", v)
      .Check(CheckHeads)
      .Check(CheckIndptrLen)
      .Output("o", SameAs("q"), "q's dtype and shape")
      .Output("lse", ShapeOf(lse_shape, DType::kFloat32), kLseDoc);
  AddScoreAttrs(op, causal);
}

}  // namespace kerneld::attention
