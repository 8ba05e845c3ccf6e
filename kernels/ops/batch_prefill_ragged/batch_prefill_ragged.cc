// batch_prefill_ragged: each request's query rows over its own rows of a
// ragged k / v (FlashInfer's BatchPrefillWithRaggedKVCache, NHD layout).
#include <map>
#include <string>

#include "common/attention/bench.h"
#include "common/attention/reference.h"
#include "common/attention/schema.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(batch_prefill_ragged) {
  OpDef op("batch_prefill_ragged");
  op.Doc(
      "Attention of each request's query rows q[qo_indptr[b]:qo_indptr[b+1]] over its keys "
      "k[kv_indptr[b]:kv_indptr[b+1]] and values v[...]. x_j = sm_scale * (q . k_j), capped "
      "as c * tanh(x_j / c) when logits_soft_cap c > 0; with causal, row i of a request sees "
      "key j only if j <= i + kv_len - qo_len (bottom-right aligned, as FlashInfer). Query head "
      "h reads kv head h / (num_qo_heads / num_kv_heads). Both indptrs start at 0 and end at "
      "their tensor's rows, never decreasing (INVALID_ARGUMENT naming the request and the "
      "entry). Accumulated in float32, rounded once to q's dtype; a row that sees no key gets "
      "o = 0 and lse = -inf.");
  attention::AddPrefillQuery(op);
  op.Input("k", kFloatingTypes, "[nnz_kv, num_kv_heads, head_dim]", "keys, q's dtype")
      .GenShape("[2*nnz_q, num_qo_heads, head_dim]")
      .Input("v", kFloatingTypes, "[nnz_kv, num_kv_heads, head_dim]", "values, q's dtype")
      .Input("kv_indptr", {DType::kInt32}, "[indptr_len]",
             "batch + 1 entries: request b's keys are k[kv_indptr[b]:kv_indptr[b+1]]")
      .Gen(InputGen::kIndptr, "nnz_kv")
      .GenShape("[4]");
  attention::AddAttendOutputs(op, "k", "v", "[nnz_q, num_qo_heads]", true);
  op.Reference(attention::PrefillRaggedReference);
  op.Bench(attention::PrefillBench(false));
  return op;
}

}  // namespace kerneld
