// rope, JIT form (the nvrtc backend, docs/jit.md): the kernel of cuda.cuh
// that the AOT launcher (rope::Rope) picks, by the same rules (vector or
// scalar units, NeoX or GPT-J, the split of a token over blocks), named for
// NVRTC with its template arguments. q and k are rotated in place: a
// request whose outputs are not its inputs' memory (the AOT binding copies
// them first) has no JIT form and runs on the AOT kernel.
#include <climits>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/jit_plan.cuh"
#include "ops/rope/cuda.cuh"

namespace kerneld::cuda {

namespace {

constexpr int kBlock = 256;  // Rope's kBlock

Status PlanRope(const KernelContext& ctx, const JitTarget& target, JitLaunch* out) {
  const TensorView& q = ctx.input("q");
  const TensorView& k = ctx.input("k");
  const TensorView& pos = ctx.input("positions");
  const TensorView& cache = ctx.input("cos_sin_cache");
  const TensorView& qo = JitOutput(ctx, "q");
  const TensorView& ko = JitOutput(ctx, "k");
  if (qo.raw() != q.raw() || ko.raw() != k.raw())
    return FailedPrecondition("rope: the JIT form rotates in place; distinct outputs run on AOT");
  JitType t;
  if (!JitTypeOf(q.dtype, &t)) return FailedPrecondition("rope: no JIT form for this dtype");
  const int64_t tokens = q.dim(0), hq = q.dim(1), hk = k.dim(1), head = q.dim(2);
  const int64_t rot = cache.dim(1), max_pos = cache.dim(0), half = rot / 2;
  if (head > INT32_MAX || (hq + hk) * half > INT32_MAX)
    return InvalidArgument("rope: nvrtc needs (num_q_heads + num_kv_heads) * rot_dim / 2 < 2^31");
  const bool neox = ctx.attr_b("is_neox");
  const int64_t run = (neox ? 4 : 8) * static_cast<int64_t>(ItemSize(q.dtype));
  const bool vec = half % 4 == 0 && head % (neox ? 4 : 8) == 0 && JitAlignedTo(q, run) &&
                   JitAlignedTo(k, run) && JitAlignedTo(cache, 16);
  const int64_t units = (hq + hk) * (vec ? half / 4 : half);
  if (tokens == 0 || units == 0) {
    out->empty = true;
    return Status::Ok();
  }
  const int64_t sms = std::max(target.sm_count, 1);
  const int64_t split =
      std::clamp<int64_t>((2 * sms + tokens - 1) / tokens, 1, (units + kBlock - 1) / kBlock);
  out->header = "ops/rope/cuda.cuh";
  // positions: int32 or int64 (any 8-byte integer type has int64_t's ABI).
  const char* p = pos.dtype == DType::kInt64 ? "long long" : "int";
  // head_dim, rot_dim and the head counts compiled in (kHead, kRot, kHq, kHk).
  out->kernel = JitName("kerneld::cuda::rope::RopeKernel",
                        {t.name, p, JitInt(vec ? 4 : 1), neox ? "true" : "false", JitInt(head),
                         JitInt(rot), JitInt(hq), JitInt(hk)});
  out->grid.x = static_cast<unsigned>(std::min<int64_t>(tokens, int64_t{1} << 30));
  out->grid.y = static_cast<unsigned>(std::min<int64_t>(split, 65535));
  out->block.x = kBlock;
  out->args.Add(q.raw()).Add(k.raw()).Add(pos.raw()).Add(cache.raw()).Add(tokens);
  out->args.Add(static_cast<int>(hq)).Add(static_cast<int>(hk)).Add(static_cast<int>(head));
  out->args.Add(static_cast<int>(rot)).Add(max_pos);
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(rope, nvrtc) { RegisterJitImpl(op, "ops/rope/cuda.cuh", PlanRope); }

}  // namespace kerneld::cuda
