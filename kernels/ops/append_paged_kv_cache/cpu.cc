// append_paged_kv_cache, CPU: every index checked before anything is
// written, then each entry's [num_kv_heads, head_dim] row copied into its
// page slot of k_cache and v_cache. Entries run in parallel (two entries
// at one slot: the later one wins on one thread; the order is the client's
// to avoid).
#include <cstring>

#include "common/attention/cpu_binding.h"
#include "kerneld/op.h"
#include "kerneld/thread_pool.h"

namespace kerneld::cpu {

namespace {

Status AppendPagedKvCache(KernelContext& ctx) {
  const char* op = "append_paged_kv_cache";
  const attention::PagedIndex idx = PagedOf(ctx);
  const TensorView& key = ctx.input("append_key");
  const int32_t* batch = ctx.input("batch_indices").ptr<int32_t>();
  const int32_t* pos = ctx.input("positions").ptr<int32_t>();
  const int64_t nnz = key.dim(0);
  KERNELD_RETURN_IF_ERROR(attention::CheckPaged(op, idx));
  KERNELD_RETURN_IF_ERROR(attention::CheckAppend(op, idx, batch, pos, nnz));
  const TensorView* in[2] = {&ctx.input("k_cache"), &ctx.input("v_cache")};
  TensorView* out[2] = {&ctx.output("k_cache"), &ctx.output("v_cache")};
  const TensorView* src[2] = {&key, &ctx.input("append_value")};
  const auto row = static_cast<size_t>(key.dim(1) * key.dim(2) * ItemSize(key.dtype));
  for (int c = 0; c < 2; ++c) {
    // In place is the contract; a distinct output gets the cache first.
    if (out[c]->raw() != in[c]->raw())
      std::memcpy(out[c]->raw(), in[c]->raw(), static_cast<size_t>(in[c]->nbytes()));
    char* cache = static_cast<char*>(out[c]->raw());
    const char* from = static_cast<const char*>(src[c]->raw());
    ParallelFor(ctx.pool, nnz, 256, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t page = idx.indices[idx.indptr[batch[i]] + pos[i] / idx.page_size];
        const int64_t slot = page * idx.page_size + pos[i] % idx.page_size;
        std::memcpy(cache + static_cast<size_t>(slot) * row, from + static_cast<size_t>(i) * row,
                    row);
      }
    });
  }
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(append_paged_kv_cache, cpu) {
  op.Impl("cpu", AppendPagedKvCache, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
