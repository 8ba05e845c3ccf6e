// rope on CUDA against the CPU implementation and the float64 reference:
// dtypes x token counts x head layouts (vector and scalar variants) x NeoX /
// GPT-J x int32 / int64 positions x offsets that break 16-byte alignment,
// and the documented behaviour for out-of-range positions.
#include <cmath>

#include "gpu_util.h"
#include "ops/rope/rope_cases.h"

namespace kerneld::testing {
namespace {

using Layout = RopeLayout;

const Layout kLayouts[] = {
    {32, 8, 128, 128},  // Llama-like, full rotary
    {3, 1, 96, 64},     // partial rotary
    {1, 1, 10, 6},      // 3 pairs: scalar path only
};

class RopeGpuTest
    : public ::testing::TestWithParam<std::tuple<DType, int64_t, int, bool, DType, bool>> {};

TEST_P(RopeGpuTest, MatchesCpuAndReference) {
  auto [dtype, tokens, layout, neox, pos_dt, misaligned] = GetParam();
  const Layout& l = kLayouts[layout];
  std::mt19937_64 rng(static_cast<uint64_t>(tokens * 13 + layout));
  const int64_t max_pos = 8192;
  HostTensors in = RopeInputs(dtype, pos_dt, tokens, l, rng, max_pos);
  AttrMap attrs = {{"is_neox", neox}};
  // One position-sized offset keeps every tensor element-aligned but breaks
  // 16-byte alignment of q, k and the cache.
  const size_t misalign = misaligned ? ItemSize(pos_dt) : 0;
  OpRun gpu = RunOnCuda("rope", in, attrs, "cuda", "", misalign);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("rope", in, attrs, gpu.outputs, RopeTol(dtype), RopeTol(dtype)),
            "");
  OpRun cpu = RunOnCpu("rope", in, attrs);
  ASSERT_TRUE(cpu.status.ok());
  // Same float32 math, at most FMA contraction apart: within one rounding.
  for (const char* name : {"q", "k"}) {
    double rtol, atol;
    Tolerance(dtype, &rtol, &atol);
    auto c = Compare(gpu.outputs[name].values, cpu.outputs[name].values, rtol, atol);
    EXPECT_EQ(c.mismatches, 0) << name << " differs from cpu; max abs err " << c.max_abs_err;
  }
}

std::string RopeName(const ::testing::TestParamInfo<RopeGpuTest::ParamType>& info) {
  const auto& [dt, tokens, layout, neox, pos, mis] = info.param;
  return std::string(DTypeName(dt)) + "_t" + std::to_string(tokens) + "_layout" +
         std::to_string(layout) + (neox ? "_neox_" : "_gptj_") + std::string(DTypeName(pos)) +
         (mis ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, RopeGpuTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{127}, int64_t{4097}),
                       ::testing::Values(0, 1, 2), ::testing::Bool(),
                       ::testing::Values(DType::kInt32, DType::kInt64), ::testing::Bool()),
    RopeName);

TEST(RopeGpu, OutOfRangePositionLeavesTokenUnchanged) {
  std::mt19937_64 rng(21);
  HostTensors in;
  in["q"] = Random(DType::kFloat16, {3, 4, 64}, rng);
  in["k"] = Random(DType::kFloat16, {3, 2, 64}, rng);
  in["positions"] = {DType::kInt64, {3}, {5, 1000, 7}};
  in["cos_sin_cache"] = RopeCache(16, 64);
  OpRun gpu = RunOnCuda("rope", in, {});
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  // Token 1 is skipped: its q and k come back as they went in.
  for (size_t i = 4 * 64; i < 8 * 64; ++i) ASSERT_EQ(gpu.outputs["q"].values[i], in["q"].values[i]);
  for (size_t i = 2 * 64; i < 4 * 64; ++i) ASSERT_EQ(gpu.outputs["k"].values[i], in["k"].values[i]);
  // The other tokens match the reference with that token's position fixed.
  HostTensors ok = in;
  ok["positions"].values[1] = 0;
  HostTensors want;
  std::string err;
  ASSERT_TRUE(Reference("rope", ok, {}, &want, &err)) << err;
  for (size_t i = 0; i < 4 * 64; ++i)
    EXPECT_NEAR(gpu.outputs["q"].values[i], want["q"].values[i], 1e-2);
  // The cpu backend rejects the same request.
  EXPECT_EQ(RunOnCpu("rope", in, {}).status.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
