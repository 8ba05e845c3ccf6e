// rope on the CPU against a float64 reference: dtypes x token counts x head
// layouts (full and partial rotary, odd pair counts) x NeoX / GPT-J x int32 /
// int64 positions, and the error cases with their messages.
#include <gtest/gtest.h>

#include <cmath>

#include "op_runner.h"
#include "ops/rope/rope_cases.h"

namespace kerneld::testing {
namespace {

using Layout = RopeLayout;

class RopeTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, int, bool, DType>> {};

const Layout kLayouts[] = {
    {4, 2, 128, 128},  // full rotary, GQA
    {3, 1, 96, 64},    // partial rotary: dims 64..95 stay
    {1, 1, 10, 6},     // 3 pairs: no vector path anywhere
};

TEST_P(RopeTest, MatchesFloat64Reference) {
  auto [dtype, tokens, layout, neox, pos_dt] = GetParam();
  const Layout& l = kLayouts[layout];
  std::mt19937_64 rng(static_cast<uint64_t>(tokens * 7 + layout));
  HostTensors in = RopeInputs(dtype, pos_dt, tokens, l, rng);
  AttrMap attrs = {{"is_neox", neox}};
  OpRun r = RunOnCpu("rope", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("rope", in, attrs, r.outputs, RopeTol(dtype), RopeTol(dtype)),
            "");
  // Dims past rot_dim are bit-for-bit untouched.
  for (int64_t i = 0; i < static_cast<int64_t>(in["q"].values.size()); ++i) {
    if (i % l.head >= l.rot) {
      ASSERT_EQ(r.outputs["q"].values[static_cast<size_t>(i)],
                in["q"].values[static_cast<size_t>(i)])
          << i;
    }
  }
}

std::string RopeName(const ::testing::TestParamInfo<RopeTest::ParamType>& info) {
  const auto& [dt, tokens, layout, neox, pos] = info.param;
  return std::string(DTypeName(dt)) + "_t" + std::to_string(tokens) + "_layout" +
         std::to_string(layout) + (neox ? "_neox_" : "_gptj_") + std::string(DTypeName(pos));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, RopeTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{127}, int64_t{4097}),
                       ::testing::Values(0, 1, 2), ::testing::Bool(),
                       ::testing::Values(DType::kInt32, DType::kInt64)),
    RopeName);

TEST(Rope, NeoxAndGptjPairDifferentDims) {
  // One head, rot = head = 4, a 90-degree rotation: NeoX pairs (0,2),(1,3);
  // GPT-J pairs (0,1),(2,3).
  HostTensors in;
  in["q"] = {DType::kFloat32, {1, 1, 4}, {1, 2, 3, 4}};
  in["k"] = {DType::kFloat32, {1, 1, 4}, {0, 0, 0, 0}};
  in["positions"] = {DType::kInt32, {1}, {0}};
  in["cos_sin_cache"] = {DType::kFloat32, {1, 4}, {0, 0, 1, 1}};  // cos 0, sin 1
  OpRun r = RunOnCpu("rope", in, {{"is_neox", true}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["q"].values, (std::vector<double>{-3, -4, 1, 2}));
  r = RunOnCpu("rope", in, {{"is_neox", false}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["q"].values, (std::vector<double>{-2, 1, -4, 3}));
}

TEST(Rope, MisalignedViews) {
  std::mt19937_64 rng(3);
  HostTensors in = RopeInputs(DType::kBFloat16, DType::kInt64, 9, kLayouts[0], rng);
  OpRun r = RunOnCpu("rope", in, {}, "", /*misalign=*/2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("rope", in, {}, r.outputs, 1e-2, 1e-2), "");
}

TEST(Rope, PositionOutOfRangeIsRejected) {
  std::mt19937_64 rng(5);
  HostTensors in = RopeInputs(DType::kFloat32, DType::kInt32, 4, kLayouts[2], rng, 16);
  in["positions"].values = {0, 15, 16, 1};
  OpRun r = RunOnCpu("rope", in, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(), "rope: positions[2] = 16 is outside [0, max_position=16)");
  in["positions"].values = {0, -1, 3, 1};
  r = RunOnCpu("rope", in, {});
  EXPECT_EQ(r.status.message(), "rope: positions[1] = -1 is outside [0, max_position=16)");
}

TEST(Rope, SchemaErrors) {
  std::mt19937_64 rng(9);
  HostTensors in = RopeInputs(DType::kFloat16, DType::kInt32, 5, kLayouts[1], rng, 32);
  auto expect = [&](HostTensors bad, const std::string& msg) {
    OpRun r = RunOnCpu("rope", bad, {});
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status.message(), msg);
  };
  HostTensors bad = in;
  bad["cos_sin_cache"] = RopeCache(32, 98);  // wider than a head
  expect(bad,
         "rope: 'cos_sin_cache' dim 1 ('rot_dim'): expected an even value in [2, head_dim=96], got "
         "98");
  bad = in;
  bad["cos_sin_cache"] = Random(DType::kFloat32, {32, 7}, rng);
  expect(
      bad,
      "rope: 'cos_sin_cache' dim 1 ('rot_dim'): expected an even value in [2, head_dim=96], got 7");
  bad = in;
  bad["k"] = Random(DType::kFloat16, {4, 1, 96}, rng);
  expect(bad, "rope: 'k' dim 0 ('num_tokens'): expected 5, got 4");
  bad = in;
  bad["k"] = Random(DType::kFloat16, {5, 1, 64}, rng);
  expect(bad, "rope: 'k' dim 2 ('head_dim'): expected 96, got 64");
  bad = in;
  bad["k"] = Random(DType::kBFloat16, {5, 1, 96}, rng);
  expect(bad, "rope: 'k' dtype bfloat16 must equal 'q' dtype float16");
  bad = in;
  bad["positions"] = Random(DType::kFloat32, {5}, rng);
  expect(bad, "rope: 'positions' dtype float32 not in {int32, int64}");
  bad = in;
  bad["cos_sin_cache"] = Random(DType::kFloat16, {32, 64}, rng);
  expect(bad, "rope: 'cos_sin_cache' dtype float16 not in {float32}");
  bad = in;
  bad.erase("positions");
  expect(bad, "rope: missing input 'positions'");
}

}  // namespace
}  // namespace kerneld::testing
