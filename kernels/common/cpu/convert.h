// Block conversions between storage types and float32 for the CPU kernels.
//
// float16 <-> float32 uses the F16C instructions when the CPU has them
// (chosen at run time: the baseline x86-64 build cannot assume them), a
// portable bit-exact software path otherwise; both round to nearest even.
// bfloat16 widening is a shift the compiler vectorizes; rounding to bfloat16
// uses AVX2 when the CPU has it (chosen at run time), the same integer
// arithmetic in scalar code otherwise.
#pragma once

#include <cstdint>

#include "kerneld/half.h"

namespace kerneld::cpu {

void ToFloat(const Half* in, float* out, int64_t n);
void ToFloat(const BFloat16* in, float* out, int64_t n);
inline void ToFloat(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}
void FromFloat(const float* in, Half* out, int64_t n);
void FromFloat(const float* in, BFloat16* out, int64_t n);
inline void FromFloat(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}

// Elements per block for the convert-compute-convert loops: small enough
// for a stack buffer in L1.
inline constexpr int64_t kConvertBlock = 1024;

}  // namespace kerneld::cpu
