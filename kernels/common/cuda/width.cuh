// A kernel's row width (hidden size, vocabulary, head dim) as the kernel
// sees it. The JIT form (the nvrtc backend, docs/jit.md) compiles the width
// in, as a template argument (SGLang's kDim): kWidth > 0, and loop bounds,
// tails and the row's index arithmetic become constants. The AOT build
// passes it at run time: kWidth = 0, the default, where Width returns its
// argument and the kernel is the code it was before the parameter existed.
#pragma once

#include <cstdint>

namespace kerneld::cuda {

template <int64_t kWidth, typename I>
__device__ __forceinline__ I Width(I runtime) {
  if constexpr (kWidth > 0)
    return static_cast<I>(kWidth);
  else
    return runtime;
}

}  // namespace kerneld::cuda
