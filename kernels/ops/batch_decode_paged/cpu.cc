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
  const TensorView& q = ctx.input("q");
  AttnProblem p;
  p.batch = idx.batch;
  p.hq = q.dim(1);
  p.hkv = ctx.input("k_cache").dim(2);
  p.d = q.dim(2);
  for (int64_t b = 0; b < p.batch; ++b) {
    p.qo_start.push_back(b);
    p.qo_len.push_back(1);
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

KERNELD_IMPL(batch_decode_paged, cpu) {
  op.Impl("cpu", BatchDecodePaged, Requirements::Cpu(), kPriorityFallback);
}

}  // namespace kerneld::cpu
