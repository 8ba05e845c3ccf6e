// The gemm op's operands and attributes as every backend reads them
// (c = alpha * a @ b, or a @ b^T with transpose_b): a [M, K], b [K, N] or
// [N, K], c [M, N], all of element type T.
#pragma once

#include <cstdint>

#include "kerneld/op.h"

namespace kerneld::gemm {

template <typename T>
struct GemmArgs {
  const T* a;
  const T* b;
  T* c;
  int64_t m, k, n;
  bool transpose_b;
  float alpha;
};

template <typename T>
GemmArgs<T> GemmArgsOf(KernelContext& ctx) {
  const TensorView& av = ctx.input("a");
  const TensorView& bv = ctx.input("b");
  const TensorView& cv = ctx.output("c");
  return {static_cast<const T*>(av.raw()),
          static_cast<const T*>(bv.raw()),
          static_cast<T*>(cv.raw()),
          av.dim(0),
          av.dim(1),
          cv.dim(1),
          ctx.attr_b("transpose_b"),
          static_cast<float>(ctx.attr_f("alpha"))};
}

}  // namespace kerneld::gemm
