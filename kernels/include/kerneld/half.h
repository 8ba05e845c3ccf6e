// Software float16 / bfloat16 for host code (CPU backend, tests, clients).
//
// Conversions round to nearest, ties to even, and keep NaN a NaN (quiet) and
// Inf an Inf: the same results the CUDA intrinsics __float2half_rn and
// __float2bfloat16_rn give, so CPU and GPU backends agree bit for bit on a
// rounding of the same float.
#pragma once

#include <cstdint>
#include <cstring>

namespace kerneld {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float BFloat16ToFloat(uint16_t h) { return BitsFloat(uint32_t{h} << 16); }

inline uint16_t FloatToBFloat16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign, force quiet bit.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = uint32_t{h & 0x8000u} << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {  // Inf / NaN
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {  // normal
    out = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {  // zero
    out = sign;
  } else {  // subnormal: value = mant * 2^-24, exact in float
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    out = sign | FloatBits(v);
  }
  return BitsFloat(out);
}

inline uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN (quiet)
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // overflow (>= 65520) -> Inf
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal/zero
    // Adding 0.5 (2^-1) aligns the subnormal grid (2^-24) to float's ulp at
    // that exponent, so float addition performs the round-to-nearest-even.
    float r = BitsFloat(abs) + 0.5f;
    return sign | static_cast<uint16_t>(FloatBits(r) - 0x3f000000u);
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return sign | static_cast<uint16_t>(abs >> 13);
}

// Tag types for templates over storage (uint16_t alone is ambiguous).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float ToFloat(Half h) { return HalfToFloat(h.bits); }
inline float ToFloat(BFloat16 h) { return BFloat16ToFloat(h.bits); }
inline float ToFloat(float f) { return f; }
template <typename T>
T FromFloat(float f);
template <>
inline Half FromFloat<Half>(float f) {
  return Half{FloatToHalf(f)};
}
template <>
inline BFloat16 FromFloat<BFloat16>(float f) {
  return BFloat16{FloatToBFloat16(f)};
}
template <>
inline float FromFloat<float>(float f) {
  return f;
}

}  // namespace kerneld
