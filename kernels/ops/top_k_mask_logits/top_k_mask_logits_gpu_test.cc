// top_k_mask_logits on CUDA against the float64 reference and the CPU
// (exact: a selection), on every launch path (cluster-split, one block a
// row, streaming): decode shapes over LLM vocabularies, odd vocabularies
// (single-element packs), a k per row with keep-all values, ties, in place,
// misaligned views.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_util.h"
#include "top_k_cases.h"

namespace kerneld::testing {
namespace {

void ExpectMatches(const HostTensors& in, const std::string& alias = "", size_t misalign = 0) {
  OpRun g = RunOnCuda("top_k_mask_logits", in, {}, "cuda", alias, misalign);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  EXPECT_EQ(CheckAgainstReference("top_k_mask_logits", in, {}, g.outputs, 0, 0), "");
  OpRun c = RunOnCpu("top_k_mask_logits", in, {});
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_EQ(g.outputs["masked_logits"].values, c.outputs["masked_logits"].values);
}

TEST(TopKMaskLogitsGpu, MatchesReferenceOnEveryPath) {
  std::mt19937_64 rng(7);
  ForEachTopKGpuCase([&](DType dt, int64_t rows, int64_t vocab) {
    HostTensors in = {{"logits", Random(dt, {rows, vocab}, rng, -8, 8)},
                      {"top_k", GpuTopK(rows, vocab, rng)}};
    ExpectMatches(in);
    in["top_k"] = {DType::kInt64, {}, {50}};
    ExpectMatches(in);
  });
}

TEST(TopKMaskLogitsGpu, TiesSignedZerosInPlaceMisaligned) {
  const double inf = INFINITY;
  ExpectMatches(
      {{"logits", {DType::kFloat32, {2, 6}, {3, 1, 3, 2, 3, -inf, 0, -0.0, 1, -1, -inf, 0}}},
       {"top_k", {DType::kInt32, {2}, {2, 3}}}});
  std::mt19937_64 rng(8);
  for (DType dt : FloatTypes()) {
    // Few distinct values: many ties at every boundary.
    HostTensor x = Random(DType::kInt32, {4, 32000}, rng, -3, 3);
    x.dtype = dt;
    HostTensors in = {{"logits", x}, {"top_k", {DType::kInt32, {4}, {1, 7000, 31999, 32000}}}};
    ExpectMatches(in);
    in["logits"] = Random(dt, {8, 32000}, rng, -4, 4);
    in["top_k"] = {DType::kInt32, {1}, {40}};
    ExpectMatches(in, "masked_logits");
    ExpectMatches(in, "", /*misalign=*/4);  // off 16 bytes, in whole int32/float32 elements
  }
}

// The shared-memory plan compares raw keys, where -0 sits just below +0:
// -0 is kept with a kept +0 (a tie) and never for a tiny positive whose
// digit is kept whole. Row 0: a tiny positive, -0s, -1s, k = 1 (only the
// positive); row 1: the same with a +0, k = 2 (the positive, +0 and every
// -0).
TEST(TopKMaskLogitsGpu, SignedZerosOnTheSharedPlan) {
  const double tiny = std::ldexp(1.0, -24);  // float16's least subnormal
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (int force : {101, 102, 104}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " force " + std::to_string(force));
      const double small = dt == DType::kFloat16 ? tiny : std::ldexp(1.0, -133);
      std::vector<double> v(2 * 4096, -1.0);
      for (int r = 0; r < 2; ++r) {
        v[r * 4096 + 4000] = small;
        for (int i = 0; i < 10; ++i) v[r * 4096 + 37 * i + 5] = -0.0;
      }
      v[4096 + 1234] = 0.0;
      ForceCluster forced(force);
      ExpectMatches({{"logits", {dt, {2, 4096}, v}}, {"top_k", {DType::kInt32, {2}, {1, 2}}}});
      OpRun g = RunOnCuda("top_k_mask_logits",
                          {{"logits", {dt, {2, 4096}, v}}, {"top_k", {DType::kInt32, {2}, {1, 2}}}},
                          {}, "cuda");
      ASSERT_TRUE(g.status.ok()) << g.status.ToString();
      const std::vector<double>& y = g.outputs["masked_logits"].values;
      int kept[2] = {0, 0};
      for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 4096; ++i) kept[r] += y[r * 4096 + i] > -INFINITY;
      EXPECT_EQ(kept[0], 1);
      EXPECT_EQ(kept[1], 12);
    }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
