// The gate activations of the *_and_mul ops, in float32, shared by the CPU
// and CUDA implementations so that both evaluate the same formula (only the
// libm differs: glibc on the host, CUDA's accurate expf/erfcf on the
// device). Plain C math functions, no CUDA headers: this header compiles in
// CPU-only builds.
#pragma once

#include <math.h>

#if defined(__CUDACC__)
#define KERNELD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define KERNELD_HOST_DEVICE inline
#endif

namespace kerneld::act {

// silu(a) = a * sigmoid(a). For a -> -inf, expf overflows to inf and the
// quotient is -0, the right limit.
struct Silu {
  KERNELD_HOST_DEVICE float operator()(float a) const { return a / (1.0f + expf(-a)); }
};

// The exact GELU, 0.5 * a * (1 + erf(a / sqrt(2))), evaluated as
// 0.5 * a * erfc(-a / sqrt(2)): the same function, but for negative a the
// float32 1 + erf(.) cancels (erf rounds towards -1) while erfc keeps its
// relative accuracy.
struct Gelu {
  KERNELD_HOST_DEVICE float operator()(float a) const {
    return 0.5f * a * erfcf(a * -0.70710678118654752f);
  }
};

// The tanh approximation, 0.5 * a * (1 + tanh(u)) with
// u = sqrt(2 / pi) * (a + 0.044715 a^3), evaluated as a / (1 + exp(-2u))
// (1 + tanh(u) = 2 / (1 + exp(-2u))): no cancellation for negative u, and
// one expf instead of tanhf.
struct GeluTanh {
  KERNELD_HOST_DEVICE float operator()(float a) const {
    const float two_u = 1.5957691216057308f * (a + 0.044715f * a * a * a);
    return a / (1.0f + expf(-two_u));
  }
};

}  // namespace kerneld::act
