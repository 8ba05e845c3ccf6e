// batch_prefill_ragged, CPU: both indptrs checked, then the shared CPU
// attention (common/attention/cpu.h) over each request's rows of k / v.
#include "common/attention/cpu_binding.h"
#include "kerneld/op.h"

namespace kerneld::cpu {

namespace {

Status BatchPrefillRagged(KernelContext& ctx) {
  const char* op = "batch_prefill_ragged";
  const TensorView& q = ctx.input("q");
  const TensorView& k = ctx.input("k");
  const int32_t* qo = ctx.input("qo_indptr").ptr<int32_t>();
  const int32_t* kv = ctx.input("kv_indptr").ptr<int32_t>();
  const int64_t batch = ctx.input("qo_indptr").dim(0) - 1;
  KERNELD_RETURN_IF_ERROR(
      attention::CheckIndptr(op, "qo_indptr", qo, batch, q.dim(0), "rows of 'q'", true));
  KERNELD_RETURN_IF_ERROR(
      attention::CheckIndptr(op, "kv_indptr", kv, batch, k.dim(0), "rows of 'k'", true));
  const AttnProblem p =
      QueryProblem(ctx, batch, k.dim(1), qo, [&](int64_t b) { return int64_t{kv[b + 1]} - kv[b]; });
  return RunAttendCpu(ctx, op, p, k, ctx.input("v"),
                      [&](int64_t b, int64_t j) { return int64_t{kv[b]} + j; });
}

}  // namespace

KERNELD_IMPL(batch_prefill_ragged, cpu) {
  op.Impl("cpu", BatchPrefillRagged, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
