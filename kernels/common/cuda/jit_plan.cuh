// Helpers for the ops' JIT plans (ops/<op>/jit.cu, kerneld/jit.h): each
// plan calls its AOT launcher's own plan functions (host code of the op's
// cuda.cuh) and names the kernel those choose, so that the nvrtc backend
// runs the kernel the cuda backend would, compiled for the device's exact
// architecture. Built with CUDA only (the plans use the launchers' host code).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

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

}  // namespace kerneld::cuda
