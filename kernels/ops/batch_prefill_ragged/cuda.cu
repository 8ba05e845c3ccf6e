// batch_prefill_ragged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh) over ragged k / v rows.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchPrefillRagged(KernelContext& ctx) {
  const char* op = "batch_prefill_ragged";
  const TensorView& q = ctx.input("q");
  const TensorView& k = ctx.input("k");
  const int batch = static_cast<int>(ctx.input("qo_indptr").dim(0) - 1);
  attention::CheckParams c;
  c.batch = batch;
  c.kv_indptr = ctx.input("kv_indptr").ptr<int32_t>();
  c.kv_exact = true;
  c.kv_total = k.dim(0);
  c.qo_indptr = ctx.input("qo_indptr").ptr<int32_t>();
  c.qo_total = q.dim(0);
  attention::AttendParams p;
  p.q = q.raw();
  p.k = k.raw();
  p.v = ctx.input("v").raw();
  p.o = ctx.output("o").raw();
  p.lse = ctx.output("lse").ptr<float>();
  p.kv.indptr = c.kv_indptr;
  p.kv.nnz = k.dim(0);
  p.qo_indptr = c.qo_indptr;
  p.batch = batch;
  p.rows = q.dim(0);
  p.hq = static_cast<int>(q.dim(1));
  p.hkv = static_cast<int>(k.dim(1));
  p.group = p.hq / p.hkv;
  const int64_t avg = batch > 0 ? k.dim(0) / batch : 0;
  return attention::RunAttend(ctx, op, p, c, avg, [&]() -> Status {
    const std::vector<int32_t> qo = attention::HostInts(ctx.input("qo_indptr"));
    const std::vector<int32_t> kv = attention::HostInts(ctx.input("kv_indptr"));
    KERNELD_RETURN_IF_ERROR(::kerneld::attention::CheckIndptr(op, "qo_indptr", qo.data(), batch,
                                                              q.dim(0), "rows of 'q'", true));
    return ::kerneld::attention::CheckIndptr(op, "kv_indptr", kv.data(), batch, k.dim(0),
                                             "rows of 'k'", true);
  });
}

}  // namespace

KERNELD_IMPL(batch_prefill_ragged, cuda) {
  op.Impl("cuda", BatchPrefillRagged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
