#include "cpu/convert.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kerneld::cpu {

namespace {

#if defined(__x86_64__)
__attribute__((target("f16c,avx"))) void HalfToFloatF16c(const Half* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i].bits);
}

__attribute__((target("f16c,avx"))) void FloatToHalfF16c(const float* in, Half* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i].bits = FloatToHalf(in[i]);
}

bool HasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}
#endif

}  // namespace

void ToFloat(const Half* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return HalfToFloatF16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i].bits);
}

void FromFloat(const float* in, Half* out, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return FloatToHalfF16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i].bits = FloatToHalf(in[i]);
}

void ToFloat(const BFloat16* in, float* out, int64_t n) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(in);
  uint32_t* o = reinterpret_cast<uint32_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = uint32_t{h[i]} << 16;
}

void FromFloat(const float* in, BFloat16* out, int64_t n) {
  // FloatToBFloat16 written without branches so the loop vectorizes: round
  // to nearest even, and a NaN stays a (quiet) NaN.
  const uint32_t* u = reinterpret_cast<const uint32_t*>(in);
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t v = u[i];
    const uint32_t rounded = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
    const uint32_t quiet = (v >> 16) | 0x40u;
    o[i] = static_cast<uint16_t>((v & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
  }
}

}  // namespace kerneld::cpu
