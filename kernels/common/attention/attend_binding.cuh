// The binding of the three attention ops to common/attention/attend.cuh
// and, for the prefills, prefill_mma.cuh: the problem from the context,
// the kernel (the tiled tensor-core prefill where PrefillMmaTakes, the
// tensor-core decode where DecodeMmaTakes, else the row kernel with its
// chunk count), the scratch, the index check, the
// launch, the flag. Decode and the paged prefill are one call here
// (RunPagedAttend); the ragged prefill's cuda.cu fills its own problem.
// Everything is a template, instantiated only by the op that calls it:
// kPrefill keeps the tiled kernel out of decode's translation unit.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/attention/attend.cuh"
#include "common/attention/cuda_binding.cuh"
#include "common/attention/decode_mma.cuh"
#include "common/attention/prefill_mma.cuh"
#include "common/cuda/dispatch.cuh"

namespace kerneld::cuda::attention {

// The tiled prefill's launch for RunAttend<true>; none for decode (whose
// translation unit then compiles no tiled kernel).
template <bool kPrefill>
struct TiledPrefill {
  template <typename T>
  static cudaError_t Launch(const AttendParams&, int, int64_t*, cudaStream_t) {
    return cudaErrorInvalidValue;
  }
};
template <>
struct TiledPrefill<true> {
  template <typename T>
  static cudaError_t Launch(const AttendParams& p, int d, int64_t* tiles, cudaStream_t s) {
    if (d == 64) return PrefillMma<T, 64>(p, tiles, s);
    if (d == 128) return PrefillMma<T, 128>(p, tiles, s);
    return cudaErrorInvalidValue;
  }
};

// p: everything but chunks, err and the workspace; avg_keys: an estimate
// of a request's keys (the host cannot read kv_len) for the split.
template <bool kPrefill>
Status RunAttend(KernelContext& ctx, const char* op, AttendParams p, CheckParams c,
                 int64_t avg_keys, std::function<Status()> host_check) {
  cudaStream_t s = StreamOf(ctx);
  const TensorView& q = ctx.input("q");
  const int d = static_cast<int>(q.dim(2));
  p.scale = ::kerneld::attention::SmScale(ctx.attr_f("sm_scale"), d);
  p.cap = static_cast<float>(ctx.attr_f("logits_soft_cap"));
  p.causal = ctx.op->FindAttr("causal") != nullptr && ctx.attr_b("causal");
  const bool tiled = kPrefill && PrefillMmaTakes(p, d);
  const bool decode_mma = !kPrefill && DecodeMmaTakes(d, MaxKeys(p.kv));
  const int sms = ctx.device.sm_count;
  p.chunks = tiled        ? 1
             : decode_mma ? DecodeMmaChunks(p.rows, p.hq / DecodePack(p.group), avg_keys, sms)
                          : ChunksFor(p.rows, p.hq / HeadsPerBlock(p.group), avg_keys, sms);
  Scratch scratch(op, ctx);
  const size_t ws =
      tiled ? PrefillMmaWorkspaceBytes(p.batch) : AttendWorkspaceBytes(p.chunks, p.rows, p.hq, d);
  if (decode_mma) {
    // The tensor-core decode checks the indices it reads itself
    // (decode_mma.cuh): no check kernel, and device memory only for the
    // split's partials (and the flag, where the host's cannot be mapped).
    if (ws > 0 || scratch.host_err() == nullptr) KERNELD_RETURN_IF_ERROR(scratch.Allocate(ws));
    if (scratch.host_err() != nullptr) {
      p.bad = scratch.host_err();
    } else {
      KERNELD_RETURN_IF_ERROR(scratch.ZeroErr());
      p.bad = scratch.err();
    }
  } else {
    KERNELD_RETURN_IF_ERROR(scratch.Allocate(ws));
    c.err = scratch.err();
    c.host_err = scratch.host_err();
    p.err = scratch.err();
    KERNELD_RETURN_IF_ERROR(CudaStatus(CheckIndices(c, sms, s), op));
  }
  if (ws > 0 && !tiled) {
    p.part_o = scratch.workspace();
    p.part_lse = p.part_o + int64_t{p.chunks} * p.rows * p.hq * d;
  }
  KERNELD_RETURN_IF_ERROR(DispatchFloatingCuda(q.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      return InvalidArgument(std::string(op) + ": the cuda impl has no float32 kernel");
    } else {
      cudaError_t e = cudaErrorInvalidValue;
      if (tiled)
        return CudaStatus(TiledPrefill<kPrefill>::template Launch<T>(
                              p, d, reinterpret_cast<int64_t*>(scratch.workspace()), s),
                          op);
      if constexpr (!kPrefill) {
        if (decode_mma) {
          const bool pdl = ctx.device.compute_capability >= 90;
          return CudaStatus(d == 64 ? DecodeMma<T, 64>(p, s, pdl) : DecodeMma<T, 128>(p, s, pdl),
                            op);
        }
      }
      if (d == 64) e = Attend<T, 64>(p, s);
      if (d == 128) e = Attend<T, 128>(p, s);
      if (d == 256) e = Attend<T, 256>(p, s);
      return CudaStatus(e, op);
    }
  }));
  return scratch.Finish(std::move(host_check));
}

// The parts of a problem every attention op reads the same way: q, o and
// lse from ctx, k / v and their kv heads from the op's key tensors.
inline AttendParams QueryParams(KernelContext& ctx, const TensorView& k, const TensorView& v,
                                int64_t hkv) {
  const TensorView& q = ctx.input("q");
  AttendParams p;
  p.q = q.raw();
  p.k = k.raw();
  p.v = v.raw();
  p.o = ctx.output("o").raw();
  p.lse = ctx.output("lse").ptr<float>();
  p.rows = q.dim(0);
  p.hq = static_cast<int>(q.dim(1));
  p.hkv = static_cast<int>(hkv);
  p.group = p.hq / p.hkv;
  return p;
}

// indices.h's CheckIndptr on a host copy of qo_indptr (the error path).
inline Status HostCheckQo(const char* op, const KernelContext& ctx, int64_t batch) {
  const std::vector<int32_t> qo = HostInts(ctx.input("qo_indptr"));
  return ::kerneld::attention::CheckIndptr(op, "qo_indptr", qo.data(), batch, ctx.input("q").dim(0),
                                           "rows of 'q'", true);
}

// Attention over the paged cache of ctx (op: a string literal): batch_decode_paged (one query row
// per request) or, with kPrefill, batch_prefill_paged (qo_indptr's rows).
template <bool kPrefill>
Status RunPagedAttend(KernelContext& ctx, const char* op) {
  const TensorView& kc = ctx.input("k_cache");
  CheckParams c = PagedCheck(ctx);
  AttendParams p = QueryParams(ctx, kc, ctx.input("v_cache"), kc.dim(2));
  if constexpr (kPrefill) {
    c.qo_indptr = ctx.input("qo_indptr").ptr<int32_t>();
    c.qo_total = p.rows;
    p.qo_indptr = c.qo_indptr;
  }
  p.kv = {c.kv_indptr, c.kv_indices, c.last_page_len,
          c.kv_total,  c.max_pages,  static_cast<int>(c.page_size)};
  p.batch = c.batch;
  const int64_t avg = c.batch > 0 ? c.kv_total * c.page_size / c.batch : 0;
  return RunAttend<kPrefill>(ctx, op, p, c, avg, [op, &ctx, batch = c.batch]() -> Status {
    if constexpr (kPrefill) KERNELD_RETURN_IF_ERROR(HostCheckQo(op, ctx, batch));
    ::kerneld::attention::PagedIndex idx;
    std::vector<std::vector<int32_t>> keep;
    return HostCheckPaged(op, ctx, &idx, &keep);
  });
}

}  // namespace kerneld::cuda::attention
