// batch_prefill_ragged, CUDA binding: the shared attention kernels
// (common/attention/attend_binding.cuh: the tiled prefill or the row
// kernel) over ragged k / v rows.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

// Each request's rows of q over its rows of k / v.
Status BatchPrefillRagged(KernelContext& ctx) {
  const char* op = "batch_prefill_ragged";
  const TensorView& k = ctx.input("k");
  const int batch = static_cast<int>(ctx.input("qo_indptr").dim(0) - 1);
  attention::AttendParams p = attention::QueryParams(ctx, k, ctx.input("v"), k.dim(1));
  attention::CheckParams c;
  c.batch = batch;
  c.kv_indptr = ctx.input("kv_indptr").ptr<int32_t>();
  c.kv_exact = true;
  c.kv_total = k.dim(0);
  c.qo_indptr = ctx.input("qo_indptr").ptr<int32_t>();
  c.qo_total = p.rows;
  p.kv.indptr = c.kv_indptr;
  p.kv.nnz = k.dim(0);
  p.qo_indptr = c.qo_indptr;
  p.batch = batch;
  const int64_t avg = batch > 0 ? k.dim(0) / batch : 0;
  return attention::RunAttend</*kPrefill=*/true>(
      ctx, op, p, c, avg, [op, &ctx, batch, rows = k.dim(0)]() -> Status {
        KERNELD_RETURN_IF_ERROR(attention::HostCheckQo(op, ctx, batch));
        const std::vector<int32_t> kv = attention::HostInts(ctx.input("kv_indptr"));
        return ::kerneld::attention::CheckIndptr(op, "kv_indptr", kv.data(), batch, rows,
                                                 "rows of 'k'", true);
      });
}

}  // namespace

KERNELD_IMPL(batch_prefill_ragged, cuda) {
  op.Impl("cuda", BatchPrefillRagged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
