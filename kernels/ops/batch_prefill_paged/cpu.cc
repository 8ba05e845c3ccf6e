// batch_prefill_paged, CPU: the indices checked, then the shared CPU
// attention (common/attention/cpu.h) over each request's query rows.
#include "common/attention/cpu_binding.h"
#include "kerneld/op.h"

namespace kerneld::cpu {

namespace {

Status BatchPrefillPaged(KernelContext& ctx) {
  const char* op = "batch_prefill_paged";
  const attention::PagedIndex idx = PagedOf(ctx);
  const TensorView& q = ctx.input("q");
  const int32_t* qo = ctx.input("qo_indptr").ptr<int32_t>();
  KERNELD_RETURN_IF_ERROR(
      attention::CheckIndptr(op, "qo_indptr", qo, idx.batch, q.dim(0), "rows of 'q'", true));
  KERNELD_RETURN_IF_ERROR(attention::CheckPaged(op, idx));
  AttnProblem p;
  p.batch = idx.batch;
  p.hq = q.dim(1);
  p.hkv = ctx.input("k_cache").dim(2);
  p.d = q.dim(2);
  for (int64_t b = 0; b < p.batch; ++b) {
    p.qo_start.push_back(qo[b]);
    p.qo_len.push_back(qo[b + 1] - qo[b]);
    p.kv_len.push_back(attention::PagedKvLen(idx, b));
  }
  ScoresOf(ctx, p.d, &p);
  const int64_t ps = idx.page_size;
  return RunAttendCpu(ctx, op, p, ctx.input("k_cache"), ctx.input("v_cache"),
                      [&](int64_t b, int64_t j) {
                        return int64_t{idx.indices[idx.indptr[b] + j / ps]} * ps + j % ps;
                      });
}

}  // namespace

KERNELD_IMPL(batch_prefill_paged, cpu) {
  op.Impl("cpu", BatchPrefillPaged, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
