// min_p_sampling on CUDA, checked statistically: samples only in the min-p
// support over 1000 draws (odd and large vocabularies, misaligned rows), the
// empirical distribution of many draws against the renormalized
// probabilities, and the same samples for the same seed.
#include "gpu_util.h"
#include "ops/min_p_sampling/min_p_check.h"
#include "sampling_check.h"

namespace kerneld::testing {
namespace {

class MinPGpuSupportTest : public ::testing::TestWithParam<std::tuple<int64_t, double, bool>> {};

TEST_P(MinPGpuSupportTest, ThousandDrawsStayInSupport) {
  auto [vocab, min_p, misaligned] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(vocab * 5 + static_cast<int64_t>(min_p * 100)));
  // One token: SkewedRow may draw it zero, a row without mass.
  const std::vector<double> row = vocab == 1 ? std::vector<double>{1.0} : SkewedRow(vocab, rng);
  HostTensors in = {{"probs", Repeat(row, 1000)}};
  AttrMap attrs = {{"min_p", min_p}, {"seed", int64_t{42}}};
  OpRun gpu = RunOnCuda("min_p_sampling", in, attrs, "cuda", "", misaligned ? 4 : 0);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckSupport(gpu.outputs["samples"].values, MinPSupport(row, min_p)), "");
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, MinPGpuSupportTest,
    ::testing::Combine(::testing::Values(int64_t{1}, int64_t{127}, int64_t{4097}, int64_t{50257}),
                       ::testing::Values(0.0, 0.05, 0.3, 1.0), ::testing::Bool()));

TEST(MinPSamplingGpu, DistributionMatchesRenormalizedProbabilities) {
  ExpectMinPDistribution(
      [](const HostTensors& in, const AttrMap& a) { return RunOnCuda("min_p_sampling", in, a); });
}

TEST(MinPSamplingGpu, SameSeedSameSamples) {
  ExpectMinPSeeded(
      [](const HostTensors& in, const AttrMap& a) { return RunOnCuda("min_p_sampling", in, a); });
}

TEST(MinPSamplingGpu, RowWithoutMassIsMinusOne) {
  HostTensors in = {{"probs", Repeat({0.0, 0.0, 0.0}, 2)}};
  OpRun r = RunOnCuda("min_p_sampling", in, {{"min_p", 0.1}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (double s : r.outputs["samples"].values) EXPECT_EQ(s, -1);
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
