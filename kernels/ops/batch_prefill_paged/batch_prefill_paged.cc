// batch_prefill_paged: each request's query rows over its paged KV cache
// (FlashInfer's BatchPrefillWithPagedKVCache, NHD layout).
#include <map>
#include <string>

#include "common/attention/bench.h"
#include "common/attention/reference.h"
#include "common/attention/schema.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(batch_prefill_paged) {
  OpDef op("batch_prefill_paged");
  op.Doc(
      "Attention of each request's query rows q[qo_indptr[b]:qo_indptr[b+1]] over its paged "
      "KV cache (the pages kv_indices[kv_indptr[b]:kv_indptr[b+1]], all full except the last, "
      "which holds kv_last_page_len[b] entries). x_j = sm_scale * (q . k_j), capped as "
      "c * tanh(x_j / c) when logits_soft_cap c > 0; with causal, row i of a request sees key j "
      "only if j <= i + kv_len - qo_len (bottom-right aligned, as FlashInfer). Query head h "
      "reads kv head h / (num_qo_heads / num_kv_heads). qo_indptr starts at 0 and ends at "
      "nnz_q; every index is checked against the extents first (INVALID_ARGUMENT naming the "
      "request and the entry). Accumulated in float32, rounded once to q's dtype; a row that "
      "sees no key gets o = 0 and lse = -inf.");
  attention::AddPrefillQuery(op);
  // Clients generate four requests of two pages of 16.
  attention::AddPagedCacheInputs(op, {.cache = "[8, 16, num_qo_heads, head_dim]",
                                      .indptr = "[4]",
                                      .indices = "[8]",
                                      .last = "[4]"});
  attention::AddAttendOutputs(op, "k_cache", "v_cache", "[nnz_q, num_qo_heads]", true);
  op.Reference(attention::PrefillPagedReference);
  op.Bench(attention::PrefillBench(true));
  return op;
}

}  // namespace kerneld
