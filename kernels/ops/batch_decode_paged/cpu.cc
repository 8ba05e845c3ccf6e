// batch_decode_paged, CPU: the indices checked, then the shared CPU
// attention (common/attention/cpu.h) with one query row per request.
#include "common/attention/cpu_binding.h"
#include "kerneld/op.h"

namespace kerneld::cpu {

namespace {

Status BatchDecodePaged(KernelContext& ctx) {
  const char* op = "batch_decode_paged";
  const attention::PagedIndex idx = PagedOf(ctx);
  KERNELD_RETURN_IF_ERROR(attention::CheckPaged(op, idx));
  return RunPagedAttendCpu(ctx, op, idx, nullptr);
}

}  // namespace

KERNELD_IMPL(batch_decode_paged, cpu) {
  op.Impl("cpu", BatchDecodePaged, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
