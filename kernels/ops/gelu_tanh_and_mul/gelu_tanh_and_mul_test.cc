// gelu_tanh_and_mul on the CPU against the float64 reference: dtypes x rows x d with
// tails, random data, poisoned outputs; leading dims, misaligned views,
// saturating inputs, errors.
#include <gtest/gtest.h>

#include "act_and_mul_cases.h"

namespace kerneld::testing {
namespace {

class ActTest : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActTest, MatchesFloat64Reference) { ExpectActMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, ActTest, ActSweep("gelu_tanh_and_mul"), ActName);

TEST(ActAndMul, LeadingDimsAndMisalignedViews) {
  ExpectActLeadingDimsAndMisalignedViews("gelu_tanh_and_mul");
}

TEST(ActAndMul, SaturatingInputs) { ExpectActSaturatingInputsMatch("gelu_tanh_and_mul"); }

TEST(ActAndMul, OddLastDimIsRejected) { ExpectActOddLastDimRejected("gelu_tanh_and_mul"); }

TEST(ActAndMul, EmptyIsANoOp) { ExpectActEmptyIsANoOp("gelu_tanh_and_mul"); }

}  // namespace
}  // namespace kerneld::testing
