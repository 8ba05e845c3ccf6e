// The binding of the three attention ops to common/attention/attend.cuh:
// the chunk count, the scratch, the index check, the launch, the flag.
#pragma once

#include <functional>

#include "common/attention/attend.cuh"
#include "common/attention/cuda_binding.cuh"
#include "common/cuda/dispatch.cuh"

namespace kerneld::cuda::attention {

// p: everything but chunks, err and the workspace; avg_keys: an estimate
// of a request's keys (the host cannot read kv_len) for the split.
inline Status RunAttend(KernelContext& ctx, const char* op, AttendParams p, CheckParams c,
                        int64_t avg_keys, const std::function<Status()>& host_check) {
  cudaStream_t s = StreamOf(ctx);
  const TensorView& q = ctx.input("q");
  const int d = static_cast<int>(q.dim(2));
  p.scale = ::kerneld::attention::SmScale(ctx.attr_f("sm_scale"), d);
  p.cap = static_cast<float>(ctx.attr_f("logits_soft_cap"));
  p.causal = ctx.op->FindAttr("causal") != nullptr && ctx.attr_b("causal");
  p.chunks = ChunksFor(p.rows, p.hq / HeadsPerBlock(p.group), avg_keys, ctx.device.sm_count);
  Scratch scratch(op, s);
  const size_t ws = AttendWorkspaceBytes(p.chunks, p.rows, p.hq, d);
  KERNELD_RETURN_IF_ERROR(scratch.Allocate(ws));
  c.err = scratch.err();
  p.err = scratch.err();
  if (ws > 0) {
    p.part_o = scratch.workspace();
    p.part_lse = p.part_o + int64_t{p.chunks} * p.rows * p.hq * d;
  }
  KERNELD_RETURN_IF_ERROR(CudaStatus(CheckIndices(c, ctx.device.sm_count, s), op));
  KERNELD_RETURN_IF_ERROR(DispatchFloatingCuda(q.dtype, op, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      return InvalidArgument(std::string(op) + ": the cuda impl has no float32 kernel");
    } else {
      cudaError_t e = cudaErrorInvalidValue;
      if (d == 64) e = Attend<T, 64>(p, s);
      if (d == 128) e = Attend<T, 128>(p, s);
      if (d == 256) e = Attend<T, 256>(p, s);
      return CudaStatus(e, op);
    }
  }));
  return scratch.Finish(host_check);
}

}  // namespace kerneld::cuda::attention
