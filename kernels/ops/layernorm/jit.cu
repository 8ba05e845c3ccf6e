// layernorm, JIT form (the nvrtc backend, docs/jit.md): the kernel of
// cuda.cuh that the AOT launcher (layernorm::Launch) picks, by the same
// rules and plan functions, named for NVRTC; eps stays a kernel argument.
#include "common/cuda/cuda_check.cuh"
#include "common/cuda/jit_plan.cuh"
#include "ops/layernorm/cuda.cuh"

namespace kerneld::cuda {

namespace {

Status PlanLayerNorm(const KernelContext& ctx, const JitTarget& target, JitLaunch* out) {
  const TensorView& x = ctx.input("x");
  const TensorView& g = ctx.input("gamma");
  const TensorView& b = ctx.input("beta");
  const TensorView& y = JitOutput(ctx, "y");
  JitRows rows;
  if (Status st = JitRowsOf("layernorm", x, {&x, &g, &b, &y}, out, &rows);
      !st.ok() || rows.r.rows == 0)
    return st;
  const auto& [r, t, n, units] = rows;
  const std::string ns = "kerneld::cuda::layernorm::";
  out->header = "ops/layernorm/cuda.cuh";
  const float eps = static_cast<float>(ctx.attr_f("eps"));
  // Few wide rows on sm_90+: split over clusters, as the AOT launcher.
  if (int64_t chunk = 0;
      JitSplitRows(ns + "LayerNormSplitKernel", t, n, r.rows, units, target, out, &chunk)) {
    out->args.Add(x.raw()).Add(g.raw()).Add(b.raw()).Add(y.raw()).Add(units).Add(chunk).Add(eps);
    return Status::Ok();
  }
  RowPlan p;
  std::string bounds;
  // Launch's rules: half-type vector rows of up to 2 * kOccThreads packs
  // take the full-occupancy instantiation.
  if (n > 1 && ItemSize(x.dtype) == 2 && units <= 2 * layernorm::kOccThreads) {
    const bool few_rows = r.rows < 4 * int64_t{target.sm_count};
    p = PlanRowsWithItems(r.rows, units,
                          units <= (few_rows ? layernorm::kOccThreads : 128) ? 1 : 2);
    bounds = JitInt(layernorm::kOccThreads) + ", " + JitInt(layernorm::kOccBlocks);
  } else {
    p = PlanNormRows(r.rows, units, n == 1 ? kMaxItems<1> : kMaxItems<4>, target.sm_count);
    bounds = "1024, 1";
  }
  out->grid.x = p.grid;
  out->block = {p.block.x, p.block.y, 1};
  out->args.Add(x.raw()).Add(g.raw()).Add(b.raw()).Add(y.raw()).Add(r.rows);
  if (p.items == 0) {
    out->kernel = JitName(ns + "LayerNormWideKernel", {t.name, JitInt(n), JitInt(units)});
    out->args.Add(units);
  } else {
    out->kernel = JitName(ns + "LayerNormKernel",
                          {t.name, JitInt(n), JitInt(p.items), bounds, JitInt(units)});
    out->args.Add(static_cast<int>(units));
  }
  out->args.Add(eps);
  return Status::Ok();
}

}  // namespace

KERNELD_IMPL(layernorm, nvrtc) { RegisterJitImpl(op, "ops/layernorm/cuda.cuh", PlanLayerNorm); }

}  // namespace kerneld::cuda
