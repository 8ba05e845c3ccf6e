// dtype names and float16 / bfloat16 conversion: every float16 value round
// trips; float -> half / bfloat16 agrees with the compiler's own IEEE
// conversion (round to nearest even) over a broad sweep, NaN and Inf included.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kerneld/dtype.h"
#include "common/cpu/convert.h"
#include "kerneld/half.h"

namespace kerneld {
namespace {

// The compiler's own IEEE binary16, the reference: clang before 15 has no
// _Float16 on x86 but converts its storage-only __fp16 the same way.
#if defined(__clang__) && __clang_major__ < 15
using CompilerHalf = __fp16;
#else
using CompilerHalf = _Float16;
#endif

TEST(DType, NamesAndSizes) {
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(ItemSize(DType::kFloat16), 2u);
  EXPECT_EQ(ItemSize(DType::kInt64), 8u);
  EXPECT_EQ(ItemSize(DType::kBool), 1u);
  EXPECT_EQ(*ParseDType("fp16"), DType::kFloat16);
  EXPECT_EQ(*ParseDType("bf16"), DType::kBFloat16);
  EXPECT_FALSE(ParseDType("float8").has_value());
  EXPECT_EQ(kFloatingTypes.ToString(), "{float16, bfloat16, float32}");
  EXPECT_FALSE(kFloatingTypes.Contains(DType::kInt32));
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half bits " << h;
    // decode agrees with the compiler
    EXPECT_EQ(static_cast<float>(static_cast<CompilerHalf>(f)), f);
  }
}

TEST(Half, FloatToHalfMatchesCompiler) {
  std::mt19937 rng(1);
  auto check = [](uint32_t bits) {
    float f = BitsFloat(bits);
    CompilerHalf ref = static_cast<CompilerHalf>(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
    } else {
      ASSERT_EQ(FloatToHalf(f), rb) << "float bits 0x" << std::hex << bits;
    }
  };
  // Dense near the half range (subnormals, normals, overflow edge) + random.
  for (uint32_t e = 0x33000000u; e < 0x47800000u; e += 0x1001u) check(e), check(e | 0x80000000u);
  for (int i = 0; i < 2000000; ++i) check(rng());
  check(FloatBits(65519.f));
  check(FloatBits(65520.f));
  check(FloatBits(std::numeric_limits<float>::infinity()));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 1.0f / 256)), 1.0f);  // tie -> even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(1.0f + 1.5f / 256)), 1.0f + 2.0f / 256);
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(INFINITY))));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(NAN))));
  // A NaN whose payload sits only in the low bits must stay NaN (not Inf).
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(BitsFloat(0x7f800001u)))));
  // Max float rounds up to Inf, as IEEE says.
  EXPECT_TRUE(std::isinf(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::max()))));
}

TEST(BlockConvert, MatchesScalarConversions) {
  // The CPU kernels convert blocks (F16C where the CPU has it); they must
  // agree bit for bit with the scalar reference conversions.
  std::mt19937 rng(3);
  std::vector<float> f(4099);
  for (auto& v : f) v = BitsFloat(rng() & 0xbfffffffu) ;  // finite-ish mix, both signs
  f[0] = 65520.f;
  f[1] = 5.9604645e-08f * 0.5f;  // half-way to the smallest subnormal
  f[2] = -0.0f;
  std::vector<Half> h(f.size());
  std::vector<BFloat16> b(f.size());
  cpu::FromFloat(f.data(), h.data(), static_cast<int64_t>(f.size()));
  cpu::FromFloat(f.data(), b.data(), static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i) {
    if (std::isnan(f[i])) continue;
    ASSERT_EQ(h[i].bits, FloatToHalf(f[i])) << i << " " << f[i];
    ASSERT_EQ(b[i].bits, FloatToBFloat16(f[i])) << i;
  }
  std::vector<float> back(f.size());
  cpu::ToFloat(h.data(), back.data(), static_cast<int64_t>(f.size()));
  for (size_t i = 0; i < f.size(); ++i) {
    if (!std::isnan(back[i])) {
      ASSERT_EQ(FloatBits(back[i]), FloatBits(HalfToFloat(h[i].bits))) << i;
    }
  }
  // NaN payloads in the low bits stay NaN in bfloat16 (not Inf).
  float nan_low = BitsFloat(0x7f800001u);
  BFloat16 bn;
  cpu::FromFloat(&nan_low, &bn, 1);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(bn.bits)));
}

TEST(BlockConvert, BFloat16BitExactOverEveryClassAndTail) {
  // The block path (AVX2 where the CPU has it) against the scalar
  // reference, bit for bit, over all exponent classes (NaN payloads, Inf,
  // subnormals, exact ties, the overflow edge), at lengths and start offsets
  // that leave vector tails, with a poisoned output.
  std::mt19937 rng(11);
  std::vector<float> f(4097 + 8);
  for (auto& v : f) v = BitsFloat(static_cast<uint32_t>(rng()));
  const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f8fffffu,
                               0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f8000u, 0x00008000u, 0x80000000u,
                               0x00000001u, 0x3f807fffu};
  for (size_t i = 0; i < sizeof(specials) / sizeof(specials[0]); ++i) f[3 * i + 1] = BitsFloat(specials[i]);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 127, 4097}) {
    for (int64_t off : {0, 1, 3}) {
      std::vector<BFloat16> out(static_cast<size_t>(n) + 1, BFloat16{0xdead});
      cpu::FromFloat(f.data() + off, out.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[static_cast<size_t>(i)].bits, FloatToBFloat16(f[static_cast<size_t>(off + i)]))
            << "n=" << n << " off=" << off << " i=" << i;
      EXPECT_EQ(out[static_cast<size_t>(n)].bits, 0xdeadu) << "wrote past n=" << n;
    }
  }
}

}  // namespace
}  // namespace kerneld
