// batch_decode_paged: one query per request over its paged KV cache
// (FlashInfer's BatchDecodeWithPagedKVCache, NHD layout).
#include <map>
#include <string>

#include "common/attention/bench.h"
#include "common/attention/reference.h"
#include "common/attention/schema.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(batch_decode_paged) {
  OpDef op("batch_decode_paged");
  op.Doc(
        "Attention of one query per request over its paged KV cache: o[b, h] = softmax(x) V "
        "with x_j = sm_scale * (q[b, h] . k_j), or c * tanh(x_j / c) with logits_soft_cap c > 0. "
        "Request b's keys are the pages kv_indices[kv_indptr[b]:kv_indptr[b+1]] in order, all "
        "full except the last, which holds kv_last_page_len[b] entries; query head h reads kv "
        "head h / (num_qo_heads / num_kv_heads). Every index is checked against the caches' "
        "extents first (INVALID_ARGUMENT naming the request and the entry). Accumulated in "
        "float32, rounded once to q's dtype. A request without pages gets o = 0 and lse = -inf.")
      .Input("q", kFloatingTypes, "[batch, num_qo_heads, head_dim]", "one query per request")
      .Input("k_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
             "key pages (NHD), q's dtype")
      .GenShape("[2*batch, 16, num_qo_heads, head_dim]")  // two pages per request
      .Input("v_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
             "value pages (NHD), q's dtype")
      .Input("kv_indptr", {DType::kInt32}, "[indptr_len]",
             "batch + 1 entries: request b's pages are kv_indices[kv_indptr[b]:kv_indptr[b+1]]")
      .Gen(InputGen::kIndptr, "nnz_pages")
      .GenShape("[batch]")
      .Input("kv_indices", {DType::kInt32}, "[nnz_pages]", "page numbers in [0, max_pages)")
      .Gen(InputGen::kPermutation, "max_pages")
      .GenShape("[2*batch]")
      .Input("kv_last_page_len", {DType::kInt32}, "[batch]",
             "entries in each request's last page, in [1, page_size]")
      .Gen(InputGen::kLength, "page_size")
      .SameDType("q", "k_cache")
      .SameDType("q", "v_cache")
      .Check(attention::CheckHeads)
      .Check(attention::CheckIndptrLen)
      .Output("o", SameAs("q"), "q's dtype and shape")
      .Output("lse", ShapeOf("[batch, num_qo_heads]", DType::kFloat32), attention::kLseDoc);
  attention::AddScoreAttrs(op, false);
  op.Reference(attention::DecodeReference);
  op.Bench(attention::DecodeBench());
  return op;
}

}  // namespace kerneld
