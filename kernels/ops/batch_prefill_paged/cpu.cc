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
  return RunPagedAttendCpu(ctx, op, idx, qo);
}

}  // namespace

KERNELD_IMPL(batch_prefill_paged, cpu) {
  op.Impl("cpu", BatchPrefillPaged, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
