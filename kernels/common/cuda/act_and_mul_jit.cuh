// The JIT form shared by the gated activations (the nvrtc backend,
// docs/jit.md): ActAndMulKernel<T, N, Act> of common/cuda/act_and_mul.cuh,
// included through the op's own cuda.cuh, launched with the AOT launcher's
// plan (PlanActAndMul). The op names its activation functor per dtype.
#pragma once

#include <functional>
#include <string>

#include "common/cuda/act_and_mul.cuh"
#include "common/cuda/jit_plan.cuh"

namespace kerneld::cuda {

// The activation functor's C++ name for a dtype ("kerneld::act::Silu").
using JitActName = std::function<std::string(DType)>;

inline JitPlanFn ActAndMulJitPlan(std::string header, JitActName act) {
  return [header = std::move(header), act = std::move(act)](
             const KernelContext& ctx, const JitTarget&, JitLaunch* out) -> Status {
    const TensorView& x = ctx.input("x");
    const TensorView& y = JitOutput(ctx, "y");
    const int64_t d = y.dim(-1);
    if (y.numel() == 0) {
      out->empty = true;
      return Status::Ok();
    }
    const int64_t rows = y.numel() / d;
    JitType t;
    if (!JitTypeOf(x.dtype, &t))
      return FailedPrecondition(ctx.op->name + ": no JIT form for this dtype");
    const int n = JitVectorRowsOk(d, t.vec, {&x, &y}) ? t.vec : 1;
    const int64_t units = d / n;
    const ActAndMulPlan p = PlanActAndMul(rows, units);
    out->header = header;
    // d (in packs) compiled in: the kernel's kUnits.
    out->kernel =
        JitName("kerneld::cuda::ActAndMulKernel", {t.name, JitInt(n), act(x.dtype), JitInt(units)});
    out->grid = {p.grid.x, p.grid.y, p.grid.z};
    out->block = {p.block.x, p.block.y, p.block.z};
    // The functor is an empty struct passed by value: one byte.
    struct Empty {};
    out->args.Add(x.raw()).Add(y.raw()).Add(rows).Add(units).Add(Empty{});
    return Status::Ok();
  };
}

}  // namespace kerneld::cuda
