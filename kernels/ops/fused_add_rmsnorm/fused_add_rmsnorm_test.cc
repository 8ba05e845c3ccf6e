// fused_add_rmsnorm on the CPU against the float64 reference: dtypes x rows
// x hidden sizes with tails (always in place), random data, poisoned
// outputs; attrs, a misaligned view, the rounding order, and the schema's
// error messages.
#include <gtest/gtest.h>

#include "norm_cases.h"

namespace kerneld::testing {
namespace {

class NormTest : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormTest, MatchesFloat64Reference) { ExpectNormMatchesReference(GetParam()); }

// fused_add_rmsnorm is always in place.
INSTANTIATE_TEST_SUITE_P(Fused, NormTest, NormSweep("fused_add_rmsnorm", ::testing::Values(true)),
                         NormName);

TEST(FusedAddRmsNorm, GemmaWeightBiasAndEps) {
  std::mt19937_64 rng(11);
  for (DType dt : FloatTypes()) {
    // Small x so that eps = 0.01 matters; weight near 0 so the bias does.
    HostTensors in = {{"x", Random(dt, {5, 256}, rng, -0.1, 0.1)},
                      {"weight", Random(dt, {256}, rng, -0.5, 0.5)},
                      {"residual", Random(dt, {5, 256}, rng, -0.1, 0.1)}};
    AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
    OpRun r = RunOnCpu("fused_add_rmsnorm", in, attrs);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(
        CheckAgainstReference("fused_add_rmsnorm", in, attrs, r.outputs, NormTol(dt), NormTol(dt)),
        "")
        << DTypeName(dt);
  }
}

TEST(FusedAddRmsNorm, MisalignedViews) {
  std::mt19937_64 rng(12);
  HostTensors in = NormInputs("fused_add_rmsnorm", DType::kFloat16, {7, 4096}, rng);
  OpRun r = RunOnCpu("fused_add_rmsnorm", in, {}, "", 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("fused_add_rmsnorm", in, {}, r.outputs, 1e-2, 1e-2), "");
}

TEST(FusedAddRmsNorm, ResidualIsTheRoundedSumAndTheNormUsesTheFloatSum) {
  std::mt19937_64 rng(13);
  for (DType dt : FloatTypes()) {
    HostTensors in = NormInputs("fused_add_rmsnorm", dt, {9, 1000}, rng);
    OpRun fused = RunOnCpu("fused_add_rmsnorm", in, {});
    ASSERT_TRUE(fused.status.ok()) << fused.status.ToString();
    // residual: x + residual in float32, rounded once -- exactly what add gives.
    OpRun sum = RunOnCpu("add", {{"a", in["x"]}, {"b", in["residual"]}}, {});
    ASSERT_TRUE(sum.status.ok());
    EXPECT_EQ(fused.outputs["residual"].values, sum.outputs["y"].values) << DTypeName(dt);
    if (dt == DType::kFloat32) {
      // In float32 the rounded and unrounded sums agree, so x must equal
      // rmsnorm(add(x, residual)) bit for bit.
      OpRun norm = RunOnCpu("rmsnorm", {{"x", sum.outputs["y"]}, {"weight", in["weight"]}}, {});
      ASSERT_TRUE(norm.status.ok());
      EXPECT_EQ(fused.outputs["x"].values, norm.outputs["y"].values);
    }
  }
}

TEST(FusedAddRmsNorm, ErrorMessages) {
  std::mt19937_64 rng(16);
  HostTensors in = NormInputs("fused_add_rmsnorm", DType::kBFloat16, {4, 8}, rng);
  in["residual"] = Random(DType::kBFloat16, {3, 8}, rng);
  EXPECT_EQ(RunOnCpu("fused_add_rmsnorm", in, {}).status.message(),
            "fused_add_rmsnorm: 'residual' dim 0 ('num_tokens'): expected 4, got 3");
  in = NormInputs("fused_add_rmsnorm", DType::kBFloat16, {2, 4, 8}, rng);
  Status st = RunOnCpu("fused_add_rmsnorm", in, {}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'x' has shape [2, 4, 8] (rank 3)"), std::string::npos)
      << st.message();
}

TEST(FusedAddRmsNorm, EmptyRowsAreANoOp) { ExpectNormEmptyRowsAreANoOp("fused_add_rmsnorm"); }

}  // namespace
}  // namespace kerneld::testing
