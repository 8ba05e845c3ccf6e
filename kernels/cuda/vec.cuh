// Device-side helpers: dtype traits, float conversion, 128-bit vector access.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace kerneld::cuda {

template <typename T>
__device__ __forceinline__ float ToF(T v);
template <>
__device__ __forceinline__ float ToF<float>(float v) { return v; }
template <>
__device__ __forceinline__ float ToF<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float ToF<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half FromF<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements of T packed into 16 bytes, for 128-bit loads and stores.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

}  // namespace kerneld::cuda
