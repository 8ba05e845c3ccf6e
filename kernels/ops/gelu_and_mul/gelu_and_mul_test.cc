// gelu_and_mul on the CPU against the float64 reference: dtypes x rows x d with
// tails, random data, poisoned outputs; leading dims, misaligned views,
// saturating inputs, errors.
#include <gtest/gtest.h>

#include "act_and_mul_cases.h"

namespace kerneld::testing {
namespace {

class ActTest : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActTest, MatchesFloat64Reference) { ExpectActMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, ActTest, ActSweep("gelu_and_mul"), ActName);

TEST(ActAndMul, LeadingDimsAndMisalignedViews) {
  ExpectActLeadingDimsAndMisalignedViews("gelu_and_mul");
}

TEST(ActAndMul, SaturatingInputs) { ExpectActSaturatingInputsMatch("gelu_and_mul"); }

TEST(ActAndMul, OddLastDimIsRejected) {
  ExpectActOddLastDimRejected("gelu_and_mul");
  std::mt19937_64 rng(23);
  HostTensors scalar = {{"x", Random(DType::kFloat32, {}, rng)}};
  Status st = RunOnCpu("gelu_and_mul", scalar, {}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rank >= 1"), std::string::npos) << st.message();
}

TEST(ActAndMul, EmptyIsANoOp) { ExpectActEmptyIsANoOp("gelu_and_mul"); }

}  // namespace
}  // namespace kerneld::testing
