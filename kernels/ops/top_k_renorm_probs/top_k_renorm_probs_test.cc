// top_k_renorm_probs on the CPU against its float64 reference: dtypes x
// shapes x the forms of 'top_k' (one k as [] or [1], int32 or int64; a k per
// row, keep-all values among them), ties at the boundary, rows without kept
// mass, in place, misaligned views, and the error cases.
#include <gtest/gtest.h>

#include <cmath>

#include "op_runner.h"
#include "top_k_cases.h"

namespace kerneld::testing {
namespace {

class TopKRenormProbsTest : public ::testing::TestWithParam<TopKParam> {};

TEST_P(TopKRenormProbsTest, MatchesReference) {
  auto [dtype, shape, form] = GetParam();
  auto [rows, vocab] = shape;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 131 + vocab + form));
  HostTensors in = {
      {"probs", Random(dtype, {rows, vocab}, rng, 0, 2.0 / static_cast<double>(vocab))},
      {"top_k", TopK(form, rows, vocab, rng)}};
  OpRun r = RunOnCpu("top_k_renorm_probs", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const HostTensor& y = r.outputs["renorm_probs"];
  EXPECT_EQ(y.dtype, dtype);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{rows, vocab}));
  EXPECT_EQ(CheckAgainstReference("top_k_renorm_probs", in, {}, r.outputs), "");
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < vocab; ++j) s += y.values[static_cast<size_t>(i * vocab + j)];
    EXPECT_NEAR(s, 1.0, dtype == DType::kFloat32 ? 1e-5 : 2e-2) << "row " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, TopKRenormProbsTest, TopKSweep(), TopKName);

TEST(TopKRenormProbs, TiesKeptAndEmptyMass) {
  HostTensors in = {{"probs",
                     {DType::kFloat32,
                      {3, 5},
                      {0.3, 0.1, 0.3, 0.0, 0.3,  //
                       0, 0, 0, 0, 0,            //
                       1, 3, 0, 0, 0}}},
                    {"top_k", {DType::kInt64, {3}, {2, 2, -1}}}};
  OpRun r = RunOnCpu("top_k_renorm_probs", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const auto& y = r.outputs["renorm_probs"].values;
  for (int i : {0, 2, 4}) EXPECT_NEAR(y[static_cast<size_t>(i)], 1.0 / 3, 1e-7);
  EXPECT_EQ(y[1], 0);
  for (int i = 5; i < 10; ++i) EXPECT_EQ(y[static_cast<size_t>(i)], 0);  // no kept mass
  EXPECT_EQ(y[10], 0.25);  // k = -1 keeps (and renormalizes) the whole row
  EXPECT_EQ(y[11], 0.75);
  EXPECT_EQ(CheckAgainstReference("top_k_renorm_probs", in, {}, r.outputs), "");
}

TEST(TopKRenormProbs, InPlaceAndMisaligned) {
  std::mt19937_64 rng(3);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"probs", Random(dt, {3, 1001}, rng, 0, 0.002)},
                      {"top_k", {DType::kInt32, {3}, {1, 40, 0}}}};
    OpRun r = RunOnCpu("top_k_renorm_probs", in, {}, "renorm_probs");
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("top_k_renorm_probs", in, {}, r.outputs), "");
    r = RunOnCpu("top_k_renorm_probs", in, {}, "", /*misalign=*/2);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("top_k_renorm_probs", in, {}, r.outputs), "");
  }
}

TEST(TopKRenormProbs, Errors) {
  std::mt19937_64 rng(2);
  HostTensor p = Random(DType::kFloat32, {2, 8}, rng, 0, 1);
  OpRun r = RunOnCpu("top_k_renorm_probs",
                     {{"probs", p}, {"top_k", {DType::kInt64, {4}, {1, 2, 3, 4}}}}, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(),
            "top_k_renorm_probs: 'top_k' has shape [4], expected [] or [1] (one k for every row) "
            "or [batch] = [2] (a k per row)");
  r = RunOnCpu("top_k_renorm_probs", {{"probs", p}, {"top_k", {DType::kInt16, {}, {2}}}}, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  HostTensor bad = p;
  bad.values[9] = -0.5;
  r = RunOnCpu("top_k_renorm_probs", {{"probs", bad}, {"top_k", {DType::kInt32, {}, {2}}}}, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(),
            "top_k_renorm_probs: probs[1, 1] = -0.500000 is not a finite non-negative probability");
  bad.values[9] = INFINITY;
  r = RunOnCpu("top_k_renorm_probs", {{"probs", bad}, {"top_k", {DType::kInt32, {}, {2}}}}, {});
  EXPECT_EQ(r.status.message(),
            "top_k_renorm_probs: probs[1, 1] = inf is not a finite non-negative probability");
}

}  // namespace
}  // namespace kerneld::testing
