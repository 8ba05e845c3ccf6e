// fused_add_rmsnorm, JIT form (the nvrtc backend, docs/jit.md): the kernel
// of cuda.cuh that the AOT launcher (LaunchFused) picks, chosen by its own
// plan (PlanNormRows), named for NVRTC; eps and weight_bias stay kernel
// arguments.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/jit_plan.cuh"
#include "ops/fused_add_rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status PlanFusedAddRmsNorm(const KernelContext& ctx, const JitTarget& target, JitLaunch* out) {
  const TensorView& x = ctx.input("x");
  const TensorView& res = ctx.input("residual");
  const TensorView& w = ctx.input("weight");
  const TensorView& xo = JitOutput(ctx, "x");
  const TensorView& ro = JitOutput(ctx, "residual");
  JitRows rows;
  if (Status st = JitRowsOf("fused_add_rmsnorm", x, {&x, &res, &w, &xo, &ro}, out, &rows);
      !st.ok() || rows.r.rows == 0)
    return st;
  const auto& [r, t, n, units] = rows;
  const std::string ns = "kerneld::cuda::fused_add_rmsnorm::";
  out->header = "ops/fused_add_rmsnorm/cuda.cuh";
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  const float bias = static_cast<float>(ctx.attr_f("weight_bias"));
  // Few wide rows on sm_90+: split over clusters, as the AOT launcher.
  if (int64_t chunk = 0;
      JitSplitRows(ns + "FusedAddRmsNormSplitKernel", t, n, r.rows, units, target, out, &chunk)) {
    out->args.Add(x.raw()).Add(res.raw()).Add(w.raw()).Add(xo.raw()).Add(ro.raw());
    out->args.Add(units).Add(chunk).Add(eps).Add(bias);
    return Status::Ok();
  }
  const RowPlan p =
      PlanNormRows(r.rows, units, n == 1 ? kMaxItems<1> : kMaxItems<4>, target.sm_count);
  out->grid.x = p.grid;
  out->block = {p.block.x, p.block.y, 1};
  out->args.Add(x.raw()).Add(res.raw()).Add(w.raw()).Add(xo.raw()).Add(ro.raw()).Add(r.rows);
  if (p.items == 0) {
    out->kernel = JitName(ns + "FusedAddRmsNormWideKernel", {t.name, JitInt(n), JitInt(units)});
    out->args.Add(units);
  } else {
    out->kernel =
        JitName(ns + "FusedAddRmsNormKernel", {t.name, JitInt(n), JitInt(p.items), JitInt(units)});
    out->args.Add(static_cast<int>(units));
  }
  out->args.Add(eps).Add(bias);
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(fused_add_rmsnorm, nvrtc) {
  RegisterJitImpl(op, "ops/fused_add_rmsnorm/cuda.cuh", PlanFusedAddRmsNorm);
}

}  // namespace kerneld::cuda
