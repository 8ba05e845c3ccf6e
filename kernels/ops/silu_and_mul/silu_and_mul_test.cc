// silu_and_mul on the CPU against the float64 reference: dtypes x rows x d with
// tails, random data, poisoned outputs; leading dims, misaligned views,
// saturating inputs, errors.
#include <gtest/gtest.h>

#include "act_and_mul_cases.h"

namespace kerneld::testing {
namespace {

class ActTest : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActTest, MatchesFloat64Reference) { ExpectActMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, ActTest, ActSweep("silu_and_mul"), ActName);

TEST(ActAndMul, LeadingDimsAndMisalignedViews) {
  ExpectActLeadingDimsAndMisalignedViews("silu_and_mul");
}

TEST(ActAndMul, SaturatingInputs) {
  ExpectActSaturatingInputsMatch("silu_and_mul");
  HostTensor x;
  x.dtype = DType::kFloat32;
  x.shape = {1, 4};
  x.values = {-200.0, 200.0, 3.0, 5.0};  // gates, then ups
  OpRun r = RunOnCpu("silu_and_mul", {{"x", x}}, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["y"].values[0], 0.0);  // -200 * sigmoid(-200) * 3 = -0
  EXPECT_EQ(r.outputs["y"].values[1], 1000.0);
}

TEST(ActAndMul, OddLastDimIsRejected) {
  ExpectActOddLastDimRejected("silu_and_mul");
  std::mt19937_64 rng(23);
  HostTensors ints = {{"x", Random(DType::kInt8, {2, 8}, rng, 0, 5)}};
  EXPECT_EQ(RunOnCpu("silu_and_mul", ints, {}).status.message(),
            "silu_and_mul: 'x' dtype int8 not in {float16, bfloat16, float32}");
}

TEST(ActAndMul, EmptyIsANoOp) { ExpectActEmptyIsANoOp("silu_and_mul"); }

}  // namespace
}  // namespace kerneld::testing
