// top_k_renorm_probs on CUDA against the float64 reference and the CPU
// (the house tolerances: float32 sums), on every launch path (cluster-split, one block a
// row, streaming): decode shapes over LLM vocabularies, odd vocabularies
// (single-element packs), a k per row with keep-all values, ties, in place,
// misaligned views, rows without mass.
#include <gtest/gtest.h>

#include "gpu_util.h"
#include "top_k_cases.h"

namespace kerneld::testing {
namespace {

void ExpectMatches(const HostTensors& in, const std::string& alias = "", size_t misalign = 0) {
  OpRun g = RunOnCuda("top_k_renorm_probs", in, {}, "cuda", alias, misalign);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(CheckAgainstReference("top_k_renorm_probs", in, {}, g.outputs), "");
  OpRun c = RunOnCpu("top_k_renorm_probs", in, {});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  // The same support as the CPU's: zeros in the same places.
  const auto& gv = g.outputs["renorm_probs"].values;
  const auto& cv = c.outputs["renorm_probs"].values;
  ASSERT_EQ(gv.size(), cv.size());
  for (size_t i = 0; i < gv.size(); ++i) ASSERT_EQ(gv[i] == 0, cv[i] == 0) << "element " << i;
}

TEST(TopKRenormProbsGpu, MatchesReferenceOnEveryPath) {
  std::mt19937_64 rng(7);
  ForEachTopKGpuCase([&](DType dt, int64_t rows, int64_t vocab) {
    HostTensors in = {
        {"probs", Random(dt, {rows, vocab}, rng, 0, 2.0 / static_cast<double>(vocab))},
        {"top_k", GpuTopK(rows, vocab, rng)}};
    ExpectMatches(in);
    in["top_k"] = {DType::kInt64, {}, {50}};
    ExpectMatches(in);
  });
}

TEST(TopKRenormProbsGpu, TiesEmptyRowsInPlaceMisaligned) {
  ExpectMatches({{"probs", {DType::kFloat32, {2, 6}, {3, 1, 3, 2, 3, 0, 0, -0.0, 0, 0, 0, 0}}},
                 {"top_k", {DType::kInt32, {2}, {2, 3}}}});
  std::mt19937_64 rng(8);
  for (DType dt : FloatTypes()) {
    // Few distinct values: many ties at every boundary.
    HostTensor x = Random(DType::kInt32, {4, 32000}, rng, 0, 4);
    x.dtype = dt;
    HostTensors in = {{"probs", x}, {"top_k", {DType::kInt32, {4}, {1, 7000, 31999, 32000}}}};
    ExpectMatches(in);
    in["probs"] = Random(dt, {8, 32000}, rng, 0, 1e-4);
    in["top_k"] = {DType::kInt32, {1}, {40}};
    ExpectMatches(in, "renorm_probs");
    ExpectMatches(in, "", /*misalign=*/4);  // off 16 bytes, in whole int32/float32 elements
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
