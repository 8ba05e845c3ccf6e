// The one dtype dispatch of the CUDA bindings: a floating DType to its CUDA
// storage type (the CPU side's is common/cpu/dispatch.h).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld::cuda {

// Calls f(T{}) with the CUDA storage type of a floating dtype.
template <typename F>
Status DispatchFloatingCuda(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::kFloat16:
      return f(__half{});
    case DType::kBFloat16:
      return f(__nv_bfloat16{});
    case DType::kFloat32:
      return f(float{});
    default:
      return InvalidArgument(std::string(op) + ": cuda has no " + std::string(DTypeName(dt)) +
                             " kernel");
  }
}

}  // namespace kerneld::cuda
