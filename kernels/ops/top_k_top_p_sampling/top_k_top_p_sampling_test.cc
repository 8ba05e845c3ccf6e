// top_k_top_p_sampling on the CPU, checked statistically: every sample in
// the top-k / top-p support, the empirical distribution of many draws equal
// to the renormalized probabilities, determinism per seed, and the error
// cases.
#include <gtest/gtest.h>

#include "op_runner.h"
#include "sampling_check.h"

namespace kerneld::testing {
namespace {

struct Filter {
  int64_t top_k;
  double top_p;
};

class SamplingSupportTest : public ::testing::TestWithParam<std::tuple<int64_t, Filter>> {};

TEST_P(SamplingSupportTest, ThousandDrawsStayInSupport) {
  auto [vocab, f] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(vocab * 17 + f.top_k));
  const std::vector<double> row = SkewedRow(vocab, rng);
  HostTensors in = {{"probs", Repeat(row, 1000)}};
  AttrMap attrs = {{"top_k", f.top_k}, {"top_p", f.top_p}, {"seed", int64_t{42}}};
  OpRun r = RunOnCpu("top_k_top_p_sampling", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const HostTensor& s = r.outputs["samples"];
  EXPECT_EQ(s.dtype, DType::kInt32);
  EXPECT_EQ(s.shape, (std::vector<int64_t>{1000}));
  EXPECT_EQ(CheckSupport(s.values, SamplingSupport(row, f.top_k, f.top_p)), "");
}

std::string SupportName(const ::testing::TestParamInfo<SamplingSupportTest::ParamType>& info) {
  const auto& [v, f] = info.param;
  return "v" + std::to_string(v) + "_k" + std::to_string(f.top_k) + "_p" +
         std::to_string(static_cast<int>(f.top_p * 100));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, SamplingSupportTest,
    ::testing::Combine(::testing::Values(int64_t{1}, int64_t{127}, int64_t{4097}),
                       ::testing::Values(Filter{0, 1.0}, Filter{1, 1.0}, Filter{50, 1.0},
                                         Filter{0, 0.9}, Filter{0, 0.3}, Filter{20, 0.8},
                                         Filter{5000, 0.95})),
    SupportName);

TEST(Sampling, LargeOddVocab) {
  std::mt19937_64 rng(11);
  const std::vector<double> row = SkewedRow(50257, rng);
  HostTensors in = {{"probs", Repeat(row, 8)}};
  AttrMap attrs = {{"top_k", int64_t{50}}, {"top_p", 0.9}, {"seed", int64_t{1}}};
  OpRun r = RunOnCpu("top_k_top_p_sampling", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckSupport(r.outputs["samples"].values, SamplingSupport(row, 50, 0.9)), "");
}

class SamplingDistributionTest : public ::testing::TestWithParam<Filter> {};

TEST_P(SamplingDistributionTest, MatchesRenormalizedProbabilities) {
  const Filter f = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(f.top_k * 1000 + f.top_p * 100));
  const std::vector<double> row = SkewedRow(40, rng);
  const std::vector<bool> keep = SamplingSupport(row, f.top_k, f.top_p);
  // 200k draws: one per row of identical rows (each row its own stream).
  HostTensors in = {{"probs", Repeat(row, 200000)}};
  OpRun r = RunOnCpu("top_k_top_p_sampling", in,
                     {{"top_k", f.top_k}, {"top_p", f.top_p}, {"seed", int64_t{7}}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const std::vector<double>& s = r.outputs["samples"].values;
  ASSERT_EQ(CheckSupport(s, keep), "");
  const DistributionCheck c = CompareDistribution(s, row, keep);
  EXPECT_GE(c.cosine, 0.99);
  EXPECT_LT(c.max_z, 5.0) << "a bin is more than 5 sigma off its expected count";
}

std::string FilterName(const ::testing::TestParamInfo<SamplingDistributionTest::ParamType>& info) {
  return "k" + std::to_string(info.param.top_k) + "_p" +
         std::to_string(static_cast<int>(info.param.top_p * 100));
}

INSTANTIATE_TEST_SUITE_P(Filters, SamplingDistributionTest,
                         ::testing::Values(Filter{0, 1.0}, Filter{5, 1.0}, Filter{0, 0.7},
                                           Filter{8, 0.6}),
                         FilterName);

TEST(Sampling, SameSeedSameSamples) {
  std::mt19937_64 rng(3);
  HostTensors in = {{"probs", Repeat(SkewedRow(300, rng), 500)}};
  AttrMap a = {{"top_k", int64_t{100}}, {"top_p", 0.95}, {"seed", int64_t{123}}};
  OpRun r1 = RunOnCpu("top_k_top_p_sampling", in, a);
  OpRun r2 = RunOnCpu("top_k_top_p_sampling", in, a);
  ASSERT_TRUE(r1.status.ok() && r2.status.ok());
  EXPECT_EQ(r1.outputs["samples"].values, r2.outputs["samples"].values);
  a["seed"] = int64_t{124};
  OpRun r3 = RunOnCpu("top_k_top_p_sampling", in, a);
  ASSERT_TRUE(r3.status.ok());
  EXPECT_NE(r1.outputs["samples"].values, r3.outputs["samples"].values);
}

TEST(Sampling, TiesAtTheBoundaryAreKept) {
  // top_k = 2: 0.2 ties for second place three times; all three stay.
  const std::vector<double> row = {0.3f, 0.2f, 0.2f, 0.2f, 0.1f, 0.0f};
  HostTensors in = {{"probs", Repeat(row, 4000)}};
  OpRun r = RunOnCpu("top_k_top_p_sampling", in, {{"top_k", int64_t{2}}});
  ASSERT_TRUE(r.status.ok());
  std::vector<int> counts(6);
  for (double s : r.outputs["samples"].values) ++counts[static_cast<size_t>(s)];
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[1], 0);
  EXPECT_GT(counts[2], 0);
  EXPECT_GT(counts[3], 0);
  EXPECT_EQ(counts[4], 0);
  EXPECT_EQ(counts[5], 0);
}

TEST(Sampling, UnnormalizedRowsAndTinyTopP) {
  // Rows need not sum to 1; top_p that small keeps only the largest.
  const std::vector<double> row = {3.0, 9.0, 1.5, 0.0, 6.0};
  HostTensors in = {{"probs", Repeat(row, 300)}};
  OpRun r = RunOnCpu("top_k_top_p_sampling", in, {{"top_p", 1e-6}, {"seed", int64_t{5}}});
  ASSERT_TRUE(r.status.ok());
  for (double s : r.outputs["samples"].values) ASSERT_EQ(s, 1);
  // top_p = 0.6 of 19.5: 9 alone is < 11.7, so 6 (9 above it) stays; 3 (15 above) goes.
  r = RunOnCpu("top_k_top_p_sampling", in, {{"top_p", 0.6}, {"seed", int64_t{5}}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckSupport(r.outputs["samples"].values, {false, true, false, false, true}), "");
}

TEST(Sampling, Errors) {
  HostTensors in = {{"probs", Repeat({0.5, 0.5}, 2)}};
  auto expect = [&](const HostTensors& t, const AttrMap& a, const std::string& msg) {
    OpRun r = RunOnCpu("top_k_top_p_sampling", t, a);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status.message(), msg);
  };
  expect(in, {{"top_k", int64_t{-1}}},
         "top_k_top_p_sampling: attr 'top_k' must be >= 0 (0 turns it off), got -1");
  expect(in, {{"top_p", 0.0}},
         "top_k_top_p_sampling: attr 'top_p' must be in (0, 1] (1 turns it off), got 0");
  expect(in, {{"top_p", 1.5}},
         "top_k_top_p_sampling: attr 'top_p' must be in (0, 1] (1 turns it off), got 1.5");
  expect(in, {{"top_k", 2.5}}, "top_k_top_p_sampling: attr 'top_k' must be int, got float 2.5");
  expect({{"probs", Repeat({0.5, -0.25}, 2)}}, {},
         "top_k_top_p_sampling: probs[0, 1] = -0.250000 is not a finite non-negative probability");
  expect({{"probs", Repeat({0.5, NAN}, 1)}}, {},
         "top_k_top_p_sampling: probs[0, 1] = nan is not a finite non-negative probability");
  HostTensor zero = Repeat({0.25, 0.75}, 3);
  zero.values[2] = zero.values[3] = 0;
  expect({{"probs", zero}}, {}, "top_k_top_p_sampling: probs row 1 has no positive mass");
  HostTensor half = Repeat({0.5, 0.5}, 2);
  half.dtype = DType::kFloat16;
  expect({{"probs", half}}, {}, "top_k_top_p_sampling: 'probs' dtype float16 not in {float32}");
}

}  // namespace
}  // namespace kerneld::testing
