// What a CUDA binding (ops/<op>/cuda.cu) needs to adapt a KernelContext to
// a launcher: every CUDA call is checked and a failure becomes INTERNAL with
// the CUDA error's name and text; the stream and grid of the context; a
// tensor seen as rows of its last dimension.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/cuda/launch.cuh"
#include "kerneld/op.h"
#include "kerneld/status.h"

namespace kerneld::cuda {

inline Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Internal(std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                  cudaGetErrorString(err));
}

// After a launch: configuration errors show at once; faults show at sync.
inline Status CheckLaunch(const char* op) { return CudaStatus(cudaGetLastError(), op); }

inline cudaStream_t StreamOf(const KernelContext& ctx) {
  return static_cast<cudaStream_t>(ctx.stream);
}

inline unsigned GridFor(const KernelContext& ctx, int64_t work, int block) {
  return GridFor(ctx.device.sm_count, work, block);
}

// x as rows of its last dimension (the row-wise ops): no rows when that
// dimension is 0.
struct RowShape {
  int64_t rows = 0;
  int64_t h = 0;
};

inline RowShape RowsOf(const TensorView& x) {
  RowShape r;
  r.h = x.dim(-1);
  r.rows = r.h == 0 ? 0 : x.numel() / r.h;
  return r;
}

}  // namespace kerneld::cuda
