// The CUDA binding shared by the gated activations (silu_and_mul,
// gelu_and_mul, gelu_tanh_and_mul): x [..., 2d] -> y [..., d] as rows, the
// dtype dispatched, the op's launcher called with its typed pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda/cuda_check.cuh"
#include "common/cuda/dispatch.cuh"
#include "kerneld/op.h"

namespace kerneld::cuda {

// launch(const T* x, T* y, rows, d, stream) -> cudaError_t, for the dtype's T.
template <typename Launch>
Status BindActAndMul(KernelContext& ctx, const char* name, Launch&& launch) {
  const TensorView& x = ctx.input("x");
  TensorView& y = ctx.output("y");
  const int64_t d = y.dim(-1);
  if (y.numel() == 0) return Status::Ok();
  const int64_t rows = y.numel() / d;
  return DispatchFloatingCuda(x.dtype, name, [&](auto tag) {
    using T = decltype(tag);
    return CudaStatus(launch(x.ptr<T>(), y.ptr<T>(), rows, d, StreamOf(ctx)), name);
  });
}

}  // namespace kerneld::cuda
