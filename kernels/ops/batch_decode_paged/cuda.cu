// batch_decode_paged, CUDA binding: the shared attention kernel
// (common/attention/attend.cuh) with one query row per request, split over
// the keys when the batch is small.
#include "common/attention/attend_binding.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

namespace {

Status BatchDecodePaged(KernelContext& ctx) {
  const char* op = "batch_decode_paged";
  const TensorView& q = ctx.input("q");
  const TensorView& kc = ctx.input("k_cache");
  attention::CheckParams c = attention::PagedCheck(ctx);
  attention::AttendParams p;
  p.q = q.raw();
  p.k = kc.raw();
  p.v = ctx.input("v_cache").raw();
  p.o = ctx.output("o").raw();
  p.lse = ctx.output("lse").ptr<float>();
  p.kv = {c.kv_indptr, c.kv_indices, c.last_page_len,
          c.kv_total,  c.max_pages,  static_cast<int>(c.page_size)};
  p.batch = c.batch;
  p.rows = q.dim(0);
  p.hq = static_cast<int>(q.dim(1));
  p.hkv = static_cast<int>(kc.dim(2));
  p.group = p.hq / p.hkv;
  const int64_t avg = c.batch > 0 ? c.kv_total * c.page_size / c.batch : 0;
  return attention::RunAttend(ctx, op, p, c, avg, [&] {
    ::kerneld::attention::PagedIndex idx;
    std::vector<std::vector<int32_t>> keep;
    return attention::HostCheckPaged(op, ctx, &idx, &keep);
  });
}

}  // namespace

KERNELD_IMPL(batch_decode_paged, cuda) {
  op.Impl("cuda", BatchDecodePaged, attention::AttendRequirements("q"), kPriorityDevice);
}

}  // namespace kerneld::cuda
