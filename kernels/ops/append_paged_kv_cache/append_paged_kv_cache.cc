// append_paged_kv_cache: new keys and values written into their requests'
// pages, in place (FlashInfer's append_paged_kv_cache, NHD layout).
#include <map>
#include <string>

#include "common/attention/bench.h"
#include "common/attention/reference.h"
#include "common/attention/schema.h"
#include "kerneld/op.h"

namespace kerneld {

KERNELD_OP(append_paged_kv_cache) {
  OpDef op("append_paged_kv_cache");
  op.Doc(
        "Writes entry i of append_key / append_value into request batch_indices[i] at token "
        "position positions[i]: page kv_indices[kv_indptr[b] + positions[i] / page_size], slot "
        "positions[i] % page_size, in place on k_cache and v_cache. The position must be one "
        "the request's pages already hold (in [0, kv_len), kv_len counting kv_last_page_len: "
        "grow the page table first, as FlashInfer). Every index is checked before anything is "
        "written (INVALID_ARGUMENT naming the entry or the request). Values are copied as they "
        "are (the caches' dtype).")
      .Input("append_key", kFloatingTypes, "[nnz, num_kv_heads, head_dim]", "new keys")
      .Input("append_value", kFloatingTypes, "[nnz, num_kv_heads, head_dim]", "new values")
      .Input("batch_indices", {DType::kInt32}, "[nnz]", "each entry's request, in [0, batch)")
      .Gen(InputGen::kSegment, "batch")  // in order, as FlashInfer's get_batch_indices_positions
      .Input("positions", {DType::kInt32}, "[nnz]", "each entry's position in its request")
      .Gen(InputGen::kModulo, "page_size")  // distinct in a request of up to page_size entries
      .Input("k_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
             "key pages (NHD), append_key's dtype")
      .GenShape("[8, 16, num_kv_heads, head_dim]")  // four requests of two pages
      .Input("v_cache", kFloatingTypes, "[max_pages, page_size, num_kv_heads, head_dim]",
             "value pages (NHD), append_key's dtype")
      .Input("kv_indices", {DType::kInt32}, "[nnz_pages]", "page numbers in [0, max_pages)")
      .Gen(InputGen::kPermutation, "max_pages")
      .GenShape("[8]")
      .Input("kv_indptr", {DType::kInt32}, "[indptr_len]",
             "batch + 1 entries: request b's pages are kv_indices[kv_indptr[b]:kv_indptr[b+1]]")
      .Gen(InputGen::kIndptr, "nnz_pages")
      .GenShape("[4]")
      .Input("kv_last_page_len", {DType::kInt32}, "[batch]",
             "entries in each request's last page, in [1, page_size]")
      .Gen(InputGen::kLength, "page_size")
      .GenShape("[4]")
      .SameDType("append_key", "append_value")
      .SameDType("append_key", "k_cache")
      .SameDType("append_key", "v_cache")
      .Check(attention::CheckHeads)
      .Check(attention::CheckIndptrLen)
      .Output("k_cache", SameAs("k_cache"), "k_cache with the keys written, in place")
      .InPlace("k_cache", "k_cache")
      .Output("v_cache", SameAs("v_cache"), "v_cache with the values written, in place")
      .InPlace("v_cache", "v_cache");
  op.Reference(attention::AppendReference);
  op.Bench(attention::AppendBench());
  return op;
}

}  // namespace kerneld
