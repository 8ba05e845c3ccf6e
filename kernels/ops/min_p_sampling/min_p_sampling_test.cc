// min_p_sampling on the CPU, checked statistically: every sample in the
// min-p support, the empirical distribution of many draws equal to the
// renormalized probabilities, determinism per seed, and the error cases.
#include <gtest/gtest.h>

#include "op_runner.h"
#include "ops/min_p_sampling/min_p_check.h"
#include "sampling_check.h"

namespace kerneld::testing {
namespace {

class MinPSupportTest : public ::testing::TestWithParam<std::tuple<int64_t, double>> {};

TEST_P(MinPSupportTest, ThousandDrawsStayInSupport) {
  auto [vocab, min_p] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(vocab * 13 + static_cast<int64_t>(min_p * 100)));
  // One token: SkewedRow may draw it zero, a row without mass.
  const std::vector<double> row = vocab == 1 ? std::vector<double>{1.0} : SkewedRow(vocab, rng);
  HostTensors in = {{"probs", Repeat(row, 1000)}};
  AttrMap attrs = {{"min_p", min_p}, {"seed", int64_t{42}}};
  OpRun r = RunOnCpu("min_p_sampling", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const HostTensor& s = r.outputs["samples"];
  EXPECT_EQ(s.dtype, DType::kInt32);
  EXPECT_EQ(s.shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(CheckSupport(s.values, MinPSupport(row, min_p)), "");
}

INSTANTIATE_TEST_SUITE_P(Sizes, MinPSupportTest,
                         ::testing::Combine(::testing::Values(int64_t{1}, int64_t{127},
                                                              int64_t{4097}),
                                            ::testing::Values(0.0, 0.05, 0.3, 1.0)));

TEST(MinPSampling, DistributionMatchesRenormalizedProbabilities) {
  ExpectMinPDistribution(
      [](const HostTensors& in, const AttrMap& a) { return RunOnCpu("min_p_sampling", in, a); });
}

TEST(MinPSampling, SameSeedSameSamplesOtherSeedOthers) {
  ExpectMinPSeeded(
      [](const HostTensors& in, const AttrMap& a) { return RunOnCpu("min_p_sampling", in, a); });
}

TEST(MinPSampling, MinPOneKeepsOnlyTheMax) {
  HostTensors in = {{"probs", Repeat({0.1, 0.5, 0.2, 0.2}, 100)}};
  OpRun r = RunOnCpu("min_p_sampling", in, {{"min_p", 1.0}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (double s : r.outputs["samples"].values) EXPECT_EQ(s, 1);
}

TEST(MinPSampling, Errors) {
  HostTensors in = {{"probs", Repeat({0.25, 0.75}, 2)}};
  EXPECT_EQ(RunOnCpu("min_p_sampling", in, {}).status.message(),
            "min_p_sampling: missing required attr 'min_p' (float)");
  EXPECT_EQ(RunOnCpu("min_p_sampling", in, {{"min_p", 1.5}}).status.message(),
            "min_p_sampling: attr 'min_p' must be in [0, 1] (0 turns it off), got 1.5");
  HostTensors neg = {{"probs", Repeat({0.5, -0.5}, 1)}};
  EXPECT_EQ(RunOnCpu("min_p_sampling", neg, {{"min_p", 0.1}}).status.code(),
            StatusCode::kInvalidArgument);
  HostTensors zero = {{"probs", Repeat({0.0, 0.0}, 1)}};
  EXPECT_EQ(RunOnCpu("min_p_sampling", zero, {{"min_p", 0.1}}).status.message(),
            "min_p_sampling: probs row 0 has no positive mass");
  std::mt19937_64 rng(1);
  HostTensors half = {{"probs", Random(DType::kFloat16, {1, 4}, rng, 0, 1)}};
  EXPECT_EQ(RunOnCpu("min_p_sampling", half, {{"min_p", 0.1}}).status.message(),
            "min_p_sampling: 'probs' dtype float16 not in {float32}");
}

}  // namespace
}  // namespace kerneld::testing
