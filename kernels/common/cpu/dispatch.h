// Dtype dispatch and element loads/stores shared by the CPU implementations.
#pragma once

#include <type_traits>

#include "kerneld/half.h"
#include "kerneld/status.h"
#include "kerneld/tensor.h"

namespace kerneld::cpu {

// Calls fn(T{}) with T = Half, BFloat16 or float for the floating dtypes.
template <typename Fn>
Status DispatchFloating(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::kFloat16:
      return fn(Half{});
    case DType::kBFloat16:
      return fn(BFloat16{});
    case DType::kFloat32:
      return fn(float{});
    default:
      return InvalidArgument(std::string(op) + ": cpu backend has no " +
                             std::string(DTypeName(dt)) + " kernel");
  }
}

// Grain for elementwise loops: ~256 KiB of float work per chunk keeps thread
// hand-off far below the loop's own cost.
inline constexpr int64_t kElementwiseGrain = 1 << 16;

}  // namespace kerneld::cpu
