// rmsnorm, JIT form (the nvrtc backend, docs/jit.md): the kernel of
// cuda.cuh that the AOT launcher (LaunchRmsNorm) picks for the request,
// chosen by the launcher's own plan functions, named for NVRTC with its
// template arguments; eps and weight_bias stay kernel arguments.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/jit_plan.cuh"
#include "ops/rmsnorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

constexpr const char* kNs = "kerneld::cuda::rmsnorm::";

Status PlanRmsNorm(const KernelContext& ctx, const JitTarget& target, JitLaunch* out) {
  const TensorView& x = ctx.input("x");
  const TensorView& w = ctx.input("weight");
  const TensorView& y = JitOutput(ctx, "y");
  JitRows rows;
  if (Status st = JitRowsOf("rmsnorm", x, {&x, &w, &y}, out, &rows); !st.ok() || rows.r.rows == 0)
    return st;
  const RowShape& r = rows.r;  // named, not bound: lambdas below capture them
  const JitType& t = rows.t;
  const int n = rows.n;
  const int64_t units = rows.units;
  // The row width (in packs) is compiled in: the kernels' last template
  // argument (kUnits, common/cuda/width.cuh).
  const std::string T = t.name, N = JitInt(n), U = JitInt(units), ns = kNs;
  out->header = "ops/rmsnorm/cuda.cuh";
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  const float bias = static_cast<float>(ctx.attr_f("weight_bias"));
  // Few wide rows on sm_90+: split over clusters, as the AOT launcher.
  if (int64_t chunk = 0;
      JitSplitRows(ns + "RmsNormSplitKernel", t, n, r.rows, units, target, out, &chunk)) {
    out->args.Add(x.raw()).Add(w.raw()).Add(y.raw()).Add(units).Add(chunk).Add(eps).Add(bias);
    return Status::Ok();
  }
  auto row_kernel = [&](int threads, int items, int min_blocks, const char* walk) {
    out->kernel = JitName(
        ns + "RmsNormRowKernel",
        {T, N, JitInt(threads), JitInt(items), JitInt(min_blocks), ns + "RowWalk::" + walk, U});
    out->grid.x = static_cast<unsigned>(std::clamp<int64_t>(r.rows, 1, 0x7fffffff));
    out->block.x = static_cast<unsigned>(threads);
  };
  bool lab = false;
  if (n > 1) {
    lab = true;
    switch (rmsnorm::RowPlanFor(r.rows, units, target.sm_count)) {
      case rmsnorm::LabPlan::kT256I2B4P:
        row_kernel(256, 2, 4, "kPersistent");
        out->cap_grid_at_residency = true;
        break;
      case rmsnorm::LabPlan::kT512I2B2Early:
        row_kernel(512, 2, 2, "kWeightEarly");
        break;
      case rmsnorm::LabPlan::kT256I4B4:
        row_kernel(256, 4, 4, "kWeightLate");
        break;
      case rmsnorm::LabPlan::kNone:
        lab = false;
        break;
    }
  }
  if (lab) {
    out->args.Add(x.raw()).Add(w.raw()).Add(y.raw()).Add(r.rows).Add(static_cast<int>(units));
    out->args.Add(eps).Add(bias);
    return Status::Ok();
  }
  const RowPlan p =
      PlanNormRows(r.rows, units, n == 1 ? kMaxItems<1> : kMaxItems<4>, target.sm_count);
  out->grid.x = p.grid;
  out->block = {p.block.x, p.block.y, 1};
  out->args.Add(x.raw()).Add(w.raw()).Add(y.raw()).Add(r.rows);
  if (p.items == 0) {
    out->kernel = JitName(ns + "RmsNormWideKernel", {T, N, U});
    out->args.Add(units);
  } else {
    out->kernel = JitName(ns + "RmsNormKernel", {T, N, JitInt(p.items), U});
    out->args.Add(static_cast<int>(units));
  }
  out->args.Add(eps).Add(bias);
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(rmsnorm, nvrtc) { RegisterJitImpl(op, "ops/rmsnorm/cuda.cuh", PlanRmsNorm); }

}  // namespace kerneld::cuda
