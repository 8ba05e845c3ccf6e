// rmsnorm on the CPU against the float64 reference: dtypes x rows x hidden
// sizes with tails, in place and not, random data, poisoned outputs; attrs,
// misaligned views, leading dims and the schema's error messages.
#include <gtest/gtest.h>

#include "norm_cases.h"

namespace kerneld::testing {
namespace {

class NormTest : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormTest, MatchesFloat64Reference) { ExpectNormMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, NormTest, NormSweep("rmsnorm", ::testing::Bool()), NormName);

TEST(RmsNorm, GemmaWeightBiasAndEps) {
  std::mt19937_64 rng(11);
  for (DType dt : FloatTypes()) {
    // Small x so that eps = 0.01 matters; weight near 0 so the bias does.
    HostTensors in = {{"x", Random(dt, {5, 256}, rng, -0.1, 0.1)},
                      {"weight", Random(dt, {256}, rng, -0.5, 0.5)}};
    AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
    OpRun r = RunOnCpu("rmsnorm", in, attrs);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("rmsnorm", in, attrs, r.outputs, NormTol(dt), NormTol(dt)), "")
        << DTypeName(dt);
  }
}

TEST(RmsNorm, LeadingDimsAndMisalignedViews) {
  std::mt19937_64 rng(12);
  ExpectNormLeadingDimsAndMisalignedViews("rmsnorm", rng);
}

TEST(RmsNorm, ErrorMessages) {
  std::mt19937_64 rng(16);
  HostTensors in = {{"x", Random(DType::kFloat16, {2, 4096}, rng)},
                    {"weight", Random(DType::kFloat16, {4095}, rng)}};
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'weight' dim 0 ('hidden_size'): expected 4096, got 4095");
  in["weight"] = Random(DType::kFloat32, {4096}, rng);
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'weight' dtype float32 must equal 'x' dtype float16");
  in["x"] = Random(DType::kInt32, {2, 4096}, rng, 0, 10);
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'x' dtype int32 not in {float16, bfloat16, float32}");
  in = NormInputs("rmsnorm", DType::kFloat32, {2, 8}, rng);
  Status st = RunOnCpu("rmsnorm", in, {{"epsilon", 1e-5}}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rmsnorm: unknown attr 'epsilon'; attrs are {eps, weight_bias}");
}

TEST(RmsNorm, EmptyRowsAreANoOp) { ExpectNormEmptyRowsAreANoOp("rmsnorm"); }

}  // namespace
}  // namespace kerneld::testing
