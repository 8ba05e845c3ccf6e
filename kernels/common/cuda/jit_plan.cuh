// Helpers for the ops' JIT plans (ops/<op>/jit.cu, kerneld/jit.h): each
// plan calls its AOT launcher's own plan functions (host code of the op's
// cuda.cuh) and names the kernel those choose, so that the nvrtc backend
// runs the kernel the cuda backend would, compiled for the device's exact
// architecture. Built with CUDA only (the plans use the launchers' host code).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/rows.cuh"
#include "common/cuda/split_rows.cuh"
#include "kerneld/jit.h"
#include "kerneld/op.h"

namespace kerneld::cuda {

// A floating dtype as the kernels take it: its NVRTC name and its 128-bit
// pack width (16 / sizeof).
struct JitType {
  const char* name = "";
  int vec = 1;
};

inline bool JitTypeOf(DType dt, JitType* out) {
  out->name = JitTypeName(dt);
  if (*out->name == '\0') return false;
  out->vec = 16 / static_cast<int>(ItemSize(dt));
  return true;
}

// "ns::Kernel<a, b, c>".
inline std::string JitName(const std::string& kernel, std::initializer_list<std::string> args) {
  return kernel + "<" + JitTemplateArgs(args) + ">";
}

inline std::string JitInt(int64_t v) { return std::to_string(v); }

// The output `name` of a const context (plans read, never write).
inline const TensorView& JitOutput(const KernelContext& ctx, const char* name) {
  return ctx.outputs[static_cast<size_t>(ctx.op->OutputIndex(name))];
}

// Whether a view's first element will be aligned to `bytes` (a power of 2)
// where the kernel runs (host views are staged into fresh device memory).
inline bool JitAlignedTo(const TensorView& v, int64_t bytes) {
  return v.device.is_cpu() || v.alignment() >= bytes;
}

// The vector path's test (rows.cuh's VectorRowsOk) on views: row length a
// whole number of packs and every view 16-byte aligned where it will run.
inline bool JitVectorRowsOk(int64_t row_len, int vec,
                            std::initializer_list<const TensorView*> views) {
  if (row_len % vec != 0) return false;
  for (const TensorView* v : views)
    if (!JitAligned16(*v)) return false;
  return true;
}

// The rows of a row-wise op's plan: x's shape, its type, and the pack the
// kernel takes (n elements: t.vec where the row and every view allow it, else
// 1) with units packs a row.
struct JitRows {
  RowShape r;
  JitType t;
  int n = 1;
  int64_t units = 0;
};

// Fills *rows for `x`, `views` being every view the kernel reads or writes.
// An x without rows sets out->empty (nothing to compile); a dtype without a
// JIT form is FAILED_PRECONDITION, named for `op`.
inline Status JitRowsOf(const char* op, const TensorView& x,
                        std::initializer_list<const TensorView*> views, JitLaunch* out,
                        JitRows* rows) {
  rows->r = RowsOf(x);
  if (rows->r.rows == 0) {
    out->empty = true;
    return Status::Ok();
  }
  if (!JitTypeOf(x.dtype, &rows->t))
    return FailedPrecondition(std::string(op) + ": no JIT form for this dtype");
  rows->n = JitVectorRowsOk(rows->r.h, rows->t.vec, views) ? rows->t.vec : 1;
  rows->units = rows->r.h / rows->n;
  return Status::Ok();
}

// The split-row launch of a norm (common/cuda/split_rows.cuh), as the AOT
// launcher makes it: `kernel` (its name without template arguments) with
// <type, N, items, units, chunk>, rows x C blocks in clusters of C. False
// when the plan does not split; the caller then plans one block a row.
// *chunk: the packs a block, the kernel's argument after units.
inline bool JitSplitRows(const std::string& kernel, const JitType& t, int n, int64_t rows,
                         int64_t units, const JitTarget& target, JitLaunch* out, int64_t* chunk) {
  const int max_items = n == 1 ? kMaxItems<1> : kMaxItems<4>;
  const SplitRowPlan sp = PlanSplitRows(rows, units, n * (16 / t.vec), max_items, target.sm_count,
                                        target.compute_capability);
  if (sp.cluster == 0) return false;
  out->kernel =
      JitName(kernel, {t.name, JitInt(n), JitInt(sp.items), JitInt(units), JitInt(sp.chunk)});
  out->grid.x = static_cast<unsigned>(rows * sp.cluster);
  out->block.x = sp.threads;
  out->cluster.x = static_cast<unsigned>(sp.cluster);
  *chunk = sp.chunk;
  return true;
}

}  // namespace kerneld::cuda
