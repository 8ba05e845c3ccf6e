// top_k_top_p_sampling on CUDA, checked statistically: samples only in the
// top-k / top-p support over 1000 draws (vector and scalar loads, odd and
// large vocabularies), the empirical distribution of 1M draws within cosine
// 0.99 (and 5 sigma per bin) of the renormalized probabilities, and the same
// samples for the same seed.
#include "gpu_util.h"
#include "sampling_check.h"

namespace kerneld::testing {
namespace {

struct Filter {
  int64_t top_k;
  double top_p;
};

class SamplingGpuSupportTest : public ::testing::TestWithParam<std::tuple<int64_t, Filter, bool>> {
};

TEST_P(SamplingGpuSupportTest, ThousandDrawsStayInSupport) {
  auto [vocab, f, misaligned] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(vocab * 3 + f.top_k));
  const std::vector<double> row = SkewedRow(vocab, rng);
  HostTensors in = {{"probs", Repeat(row, 1000)}};
  AttrMap attrs = {{"top_k", f.top_k}, {"top_p", f.top_p}, {"seed", int64_t{42}}};
  OpRun gpu = RunOnCuda("top_k_top_p_sampling", in, attrs, "cuda", "", misaligned ? 4 : 0);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckSupport(gpu.outputs["samples"].values, SamplingSupport(row, f.top_k, f.top_p)),
            "");
}

std::string SupportName(const ::testing::TestParamInfo<SamplingGpuSupportTest::ParamType>& info) {
  const auto& [v, f, mis] = info.param;
  return "v" + std::to_string(v) + "_k" + std::to_string(f.top_k) + "_p" +
         std::to_string(static_cast<int>(f.top_p * 100)) + (mis ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, SamplingGpuSupportTest,
    ::testing::Combine(::testing::Values(int64_t{1}, int64_t{127}, int64_t{4096}, int64_t{4097}),
                       ::testing::Values(Filter{0, 1.0}, Filter{1, 1.0}, Filter{50, 1.0},
                                         Filter{0, 0.9}, Filter{0, 0.3}, Filter{20, 0.8},
                                         Filter{5000, 0.95}),
                       ::testing::Bool()),
    SupportName);

TEST(SamplingGpu, LargeOddVocab) {
  std::mt19937_64 rng(11);
  for (int64_t vocab : {50257, 128256}) {
    const std::vector<double> row = SkewedRow(vocab, rng);
    HostTensors in = {{"probs", Repeat(row, 64)}};
    for (Filter f : {Filter{50, 0.9}, Filter{0, 0.95}, Filter{1000, 1.0}}) {
      OpRun gpu = RunOnCuda("top_k_top_p_sampling", in,
                            {{"top_k", f.top_k}, {"top_p", f.top_p}, {"seed", int64_t{1}}});
      ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
      EXPECT_EQ(CheckSupport(gpu.outputs["samples"].values, SamplingSupport(row, f.top_k, f.top_p)),
                "")
          << "vocab " << vocab << " top_k " << f.top_k << " top_p " << f.top_p;
    }
  }
}

class SamplingGpuDistributionTest : public ::testing::TestWithParam<Filter> {};

TEST_P(SamplingGpuDistributionTest, MillionDrawsMatchRenormalizedProbabilities) {
  const Filter f = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(f.top_k * 1000 + f.top_p * 100));
  const std::vector<double> row = SkewedRow(40, rng);
  const std::vector<bool> keep = SamplingSupport(row, f.top_k, f.top_p);
  // 1M draws: 10 seeds x 100k identical rows (each row its own Philox stream).
  HostTensors in = {{"probs", Repeat(row, 100000)}};
  std::vector<double> samples;
  for (int64_t seed = 0; seed < 10; ++seed) {
    OpRun gpu = RunOnCuda("top_k_top_p_sampling", in,
                          {{"top_k", f.top_k}, {"top_p", f.top_p}, {"seed", seed}});
    ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
    const auto& s = gpu.outputs["samples"].values;
    samples.insert(samples.end(), s.begin(), s.end());
  }
  ASSERT_EQ(CheckSupport(samples, keep), "");
  const DistributionCheck c = CompareDistribution(samples, row, keep);
  EXPECT_GE(c.cosine, 0.99);
  EXPECT_LT(c.max_z, 5.0) << "a bin is more than 5 sigma off its expected count";
}

std::string FilterName(
    const ::testing::TestParamInfo<SamplingGpuDistributionTest::ParamType>& info) {
  return "k" + std::to_string(info.param.top_k) + "_p" +
         std::to_string(static_cast<int>(info.param.top_p * 100));
}

INSTANTIATE_TEST_SUITE_P(Filters, SamplingGpuDistributionTest,
                         ::testing::Values(Filter{0, 1.0}, Filter{5, 1.0}, Filter{0, 0.7},
                                           Filter{8, 0.6}),
                         FilterName);

TEST(SamplingGpu, SameSeedSameSamples) {
  std::mt19937_64 rng(3);
  HostTensors in = {{"probs", Repeat(SkewedRow(50257, rng), 32)}};
  AttrMap a = {{"top_k", int64_t{100}}, {"top_p", 0.95}, {"seed", int64_t{123}}};
  OpRun r1 = RunOnCuda("top_k_top_p_sampling", in, a);
  OpRun r2 = RunOnCuda("top_k_top_p_sampling", in, a);
  ASSERT_TRUE(r1.status.ok() && r2.status.ok());
  EXPECT_EQ(r1.outputs["samples"].values, r2.outputs["samples"].values);
  a["seed"] = int64_t{124};
  OpRun r3 = RunOnCuda("top_k_top_p_sampling", in, a);
  ASSERT_TRUE(r3.status.ok());
  EXPECT_NE(r1.outputs["samples"].values, r3.outputs["samples"].values);
}

TEST(SamplingGpu, TiesKeptAndEmptyRowsMarked) {
  // top_k = 2 with a three-way tie for second place: all three stay.
  HostTensor t = Repeat({0.3f, 0.2f, 0.2f, 0.2f, 0.1f, 0.0f}, 4000);
  OpRun gpu = RunOnCuda("top_k_top_p_sampling", {{"probs", t}}, {{"top_k", int64_t{2}}});
  ASSERT_TRUE(gpu.status.ok());
  EXPECT_EQ(CheckSupport(gpu.outputs["samples"].values, {true, true, true, true, false, false}),
            "");
  std::vector<int> counts(6);
  for (double s : gpu.outputs["samples"].values) ++counts[static_cast<size_t>(s)];
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[3], 0);
  // A row without positive mass cannot be sampled: the cuda backend marks it -1.
  HostTensor z = Repeat({0.25, 0.75}, 3);
  z.values[2] = z.values[3] = 0;
  gpu = RunOnCuda("top_k_top_p_sampling", {{"probs", z}}, {});
  ASSERT_TRUE(gpu.status.ok());
  EXPECT_EQ(gpu.outputs["samples"].values[1], -1);
  EXPECT_NE(gpu.outputs["samples"].values[0], -1);
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
