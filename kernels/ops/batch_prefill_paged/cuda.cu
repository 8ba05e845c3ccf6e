// batch_prefill_paged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh), a block per query row and head group.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchPrefillPaged(KernelContext& ctx) {
  const char* op = "batch_prefill_paged";
  const TensorView& q = ctx.input("q");
  const TensorView& kc = ctx.input("k_cache");
  attention::CheckParams c = attention::PagedCheck(ctx);
  c.qo_indptr = ctx.input("qo_indptr").ptr<int32_t>();
  c.qo_total = q.dim(0);
  attention::AttendParams p;
  p.q = q.raw();
  p.k = kc.raw();
  p.v = ctx.input("v_cache").raw();
  p.o = ctx.output("o").raw();
  p.lse = ctx.output("lse").ptr<float>();
  p.kv = {c.kv_indptr, c.kv_indices, c.last_page_len,
          c.kv_total,  c.max_pages,  static_cast<int>(c.page_size)};
  p.qo_indptr = c.qo_indptr;
  p.batch = c.batch;
  p.rows = q.dim(0);
  p.hq = static_cast<int>(q.dim(1));
  p.hkv = static_cast<int>(kc.dim(2));
  p.group = p.hq / p.hkv;
  const int64_t avg = c.batch > 0 ? c.kv_total * c.page_size / c.batch : 0;
  return attention::RunAttend(ctx, op, p, c, avg, [&]() -> Status {
    const std::vector<int32_t> qo = attention::HostInts(ctx.input("qo_indptr"));
    KERNELD_RETURN_IF_ERROR(::kerneld::attention::CheckIndptr(op, "qo_indptr", qo.data(), c.batch,
                                                              q.dim(0), "rows of 'q'", true));
    ::kerneld::attention::PagedIndex idx;
    std::vector<std::vector<int32_t>> keep;
    return attention::HostCheckPaged(op, ctx, &idx, &keep);
  });
}

}  // namespace

KERNELD_IMPL(batch_prefill_paged, cuda) {
  op.Impl("cuda", BatchPrefillPaged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
