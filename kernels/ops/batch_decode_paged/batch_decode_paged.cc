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
      .Input("q", kFloatingTypes, "[batch, num_qo_heads, head_dim]", "one query per request");
  // Clients generate two pages of 16 per request.
  attention::AddPagedCacheInputs(op, {.cache = "[2*batch, 16, num_qo_heads, head_dim]",
                                      .indptr = "[batch]",
                                      .indices = "[2*batch]"});
  attention::AddAttendOutputs(op, "k_cache", "v_cache", "[batch, num_qo_heads]", false);
  op.Reference(attention::DecodeReference);
  op.Bench(attention::DecodeBench());
  return op;
}

}  // namespace kerneld
