// Device-side helpers: dtype traits, float conversion, 128-bit vector access.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace kerneld::cuda {

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<__half>(__half v) {
  return __half2float(v);
}
// bfloat16 is the top half of a float32: widening is a shift, exact. Spelled
// out because __bfloat162float cost registers enough to make layernorm's
// bfloat16 kernel spill at full occupancy (CUDA 13, sm_90).
template <>
__device__ __forceinline__ float ToFloat<__nv_bfloat16>(__nv_bfloat16 v) {
  return __uint_as_float(static_cast<uint32_t>(__bfloat16_as_ushort(v)) << 16);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Two adjacent elements (4-byte aligned for 16-bit types) to float32 and
// back; the 16-bit types convert a pair in one instruction.
template <typename T>
__device__ __forceinline__ float2 ToFloat2(const T* p) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(p));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t u = *reinterpret_cast<const uint32_t*>(p);
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  } else {
    return make_float2(ToFloat(p[0]), ToFloat(p[1]));
  }
}
template <typename T>
__device__ __forceinline__ void FromFloat2(float2 v, T* p) {
  if constexpr (std::is_same_v<T, __half>) {
    *reinterpret_cast<__half2*>(p) = __float22half2_rn(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __float22bfloat162_rn(v);
  } else {
    p[0] = FromFloat<T>(v.x);
    p[1] = FromFloat<T>(v.y);
  }
}

// N elements of T packed into 16 bytes, for 128-bit loads and stores.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

}  // namespace kerneld::cuda
