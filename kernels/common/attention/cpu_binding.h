// What the CPU impls of the attention ops share: the context's index
// arrays as a PagedIndex, and the call of AttendCpu for a problem.
#pragma once

#include <string>

#include "common/attention/cpu.h"
#include "common/attention/indices.h"
#include "common/attention/schema.h"
#include "common/cpu/dispatch.h"
#include "kerneld/op.h"

namespace kerneld::cpu {

inline ::kerneld::attention::PagedIndex PagedOf(const KernelContext& ctx) {
  const TensorView& kc = ctx.input("k_cache");
  const TensorView& ix = ctx.input("kv_indices");
  const TensorView& lp = ctx.input("kv_last_page_len");
  return {ctx.input("kv_indptr").ptr<int32_t>(),
          ix.ptr<int32_t>(),
          lp.ptr<int32_t>(),
          lp.dim(0),
          ix.dim(0),
          kc.dim(0),
          kc.dim(1)};
}

// sm_scale, logits_soft_cap and causal (where the op has it) from ctx.
inline void ScoresOf(const KernelContext& ctx, int64_t head_dim, AttnProblem* p) {
  p->scale = ::kerneld::attention::SmScale(ctx.attr_f("sm_scale"), head_dim);
  p->cap = static_cast<float>(ctx.attr_f("logits_soft_cap"));
  p->causal = ctx.op->FindAttr("causal") != nullptr && ctx.attr_b("causal");
}

// Runs the problem over k / v rows token(b, j) into outputs o and lse.
template <typename TokenFn>
Status RunAttendCpu(KernelContext& ctx, const char* op, const AttnProblem& p, const TensorView& k,
                    const TensorView& v, TokenFn token) {
  const TensorView& q = ctx.input("q");
  TensorView& o = ctx.output("o");
  float* lse = ctx.output("lse").ptr<float>();
  return DispatchFloating(q.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    AttendCpu<T>(ctx.pool, p, q.ptr<T>(), k.ptr<T>(), v.ptr<T>(), token, o.ptr<T>(), lse);
    return Status::Ok();
  });
}

// The problem of ctx's q over `batch` requests of kv_len(b) keys each:
// request b's query rows are [qo[b], qo[b + 1]) of q, or row b alone when
// qo is null (decode); the caller has checked every index.
template <typename KvLenFn>
AttnProblem QueryProblem(const KernelContext& ctx, int64_t batch, int64_t hkv, const int32_t* qo,
                         KvLenFn kv_len) {
  const TensorView& q = ctx.input("q");
  AttnProblem p;
  p.batch = batch;
  p.hq = q.dim(1);
  p.hkv = hkv;
  p.d = q.dim(2);
  for (int64_t b = 0; b < p.batch; ++b) {
    p.qo_start.push_back(qo ? qo[b] : b);
    p.qo_len.push_back(qo ? qo[b + 1] - qo[b] : 1);
    p.kv_len.push_back(kv_len(b));
  }
  ScoresOf(ctx, p.d, &p);
  return p;
}

// Attention over a paged cache (idx, already checked): request b's query
// rows are [qo[b], qo[b + 1]) of q, or row b alone when qo is null (decode).
inline Status RunPagedAttendCpu(KernelContext& ctx, const char* op,
                                const ::kerneld::attention::PagedIndex& idx, const int32_t* qo) {
  const AttnProblem p =
      QueryProblem(ctx, idx.batch, ctx.input("k_cache").dim(2), qo,
                   [&](int64_t b) { return ::kerneld::attention::PagedKvLen(idx, b); });
  const int64_t ps = idx.page_size;
  return RunAttendCpu(ctx, op, p, ctx.input("k_cache"), ctx.input("v_cache"),
                      [&](int64_t b, int64_t j) {
                        return int64_t{idx.indices[idx.indptr[b] + j / ps]} * ps + j % ps;
                      });
}

}  // namespace kerneld::cpu
