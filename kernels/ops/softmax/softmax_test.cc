// softmax on the CPU against a float64 reference: dtypes x shapes (odd and
// large vocabularies) x temperatures, stability with huge logits, and the
// error cases.
#include <gtest/gtest.h>

#include <cmath>

#include "op_runner.h"
#include "ops/softmax/plan.h"

namespace kerneld::testing {
namespace {

class SoftmaxTest
    : public ::testing::TestWithParam<std::tuple<DType, std::pair<int64_t, int64_t>, double>> {};

TEST_P(SoftmaxTest, MatchesFloat64Reference) {
  auto [dtype, shape, temperature] = GetParam();
  auto [rows, vocab] = shape;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 131 + vocab));
  HostTensors in = {{"logits", Random(dtype, {rows, vocab}, rng, -8, 8)}};
  AttrMap attrs = {{"temperature", temperature}};
  OpRun r = RunOnCpu("softmax", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const HostTensor& p = r.outputs["probs"];
  EXPECT_EQ(p.dtype, DType::kFloat32);
  EXPECT_EQ(p.shape, (std::vector<int64_t>{rows, vocab}));
  EXPECT_EQ(CheckAgainstReference("softmax", in, attrs, r.outputs), "");
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < vocab; ++j) s += p.values[static_cast<size_t>(i * vocab + j)];
    EXPECT_NEAR(s, 1.0, 1e-5) << "row " << i;
  }
}

std::string SoftmaxName(const ::testing::TestParamInfo<SoftmaxTest::ParamType>& info) {
  const auto& [dt, shape, t] = info.param;
  return std::string(DTypeName(dt)) + "_" + std::to_string(shape.first) + "x" + std::to_string(shape.second) + "_t" +
         std::to_string(static_cast<int>(t * 10));
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, SoftmaxTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 127},
                                         std::pair<int64_t, int64_t>{2, 4097}, std::pair<int64_t, int64_t>{5, 8192},
                                         std::pair<int64_t, int64_t>{2, 50257}),
                       ::testing::Values(1.0, 0.7, 2.5)),
                         SoftmaxName);

TEST(Softmax, StableForHugeLogits) {
  HostTensors in;
  in["logits"] = {DType::kFloat32, {2, 3}, {1000, 999, -1000, -3e38, 3e38, 0}};
  OpRun r = RunOnCpu("softmax", in, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckAgainstReference("softmax", in, {}, r.outputs), "");
  EXPECT_NEAR(r.outputs["probs"].values[0], 1 / (1 + std::exp(-1.0)), 1e-6);
  EXPECT_EQ(r.outputs["probs"].values[4], 1.0);
}

TEST(Softmax, MisalignedView) {
  std::mt19937_64 rng(1);
  HostTensors in = {{"logits", Random(DType::kFloat16, {3, 1000}, rng, -4, 4)}};
  OpRun r = RunOnCpu("softmax", in, {}, "", /*misalign=*/2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckAgainstReference("softmax", in, {}, r.outputs), "");
}

TEST(Softmax, Errors) {
  std::mt19937_64 rng(2);
  HostTensors in = {{"logits", Random(DType::kFloat32, {2, 8}, rng)}};
  OpRun r = RunOnCpu("softmax", in, {{"temperature", 0.0}});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(), "softmax: attr 'temperature' must be a finite value > 0, got 0");
  r = RunOnCpu("softmax", in, {{"temperature", -1.5}});
  EXPECT_EQ(r.status.message(), "softmax: attr 'temperature' must be a finite value > 0, got -1.5");
  r = RunOnCpu("softmax", in, {{"temperature", std::string("hot")}});
  EXPECT_EQ(r.status.message(), "softmax: attr 'temperature' must be float, got string \"hot\"");
  r = RunOnCpu("softmax", {{"logits", Random(DType::kInt32, {2, 8}, rng, 0, 9)}}, {});
  EXPECT_EQ(r.status.message(), "softmax: 'logits' dtype int32 not in {float16, bfloat16, float32}");
  r = RunOnCpu("softmax", {{"logits", Random(DType::kFloat32, {8}, rng)}}, {});
  EXPECT_EQ(r.status.message(), "softmax: 'logits' has shape [8] (rank 1), expected [batch, vocab] (rank 2)");
}

// The CUDA launch plan (host-only): split rows over clusters at decode
// shapes on sm_90, one block a row elsewhere.
TEST(Softmax, CudaPlanChooser) {
  using cuda::softmax::ChoosePlan;
  cuda::softmax::DeviceCaps h100{0, 90, 132}, a100{0, 80, 108};
  EXPECT_EQ(ChoosePlan(16, 128256, a100).cluster, 0);  // no clusters before sm_90
  EXPECT_EQ(ChoosePlan(1, 1, h100).cluster, 0);
  EXPECT_EQ(ChoosePlan(3, 127, h100).cluster, 0);
  EXPECT_EQ(ChoosePlan(16, 4096, h100).cluster, 0);     // short rows stay per row
  EXPECT_EQ(ChoosePlan(1, 16384, h100).cluster, 0);
  EXPECT_EQ(ChoosePlan(256, 128256, h100).cluster, 0);  // every SM busy already
  EXPECT_EQ(ChoosePlan(1, 32000, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(1, 32000, h100).max_threads, 256);
  EXPECT_EQ(ChoosePlan(16, 32768, h100).cluster, 8);
  EXPECT_EQ(ChoosePlan(16, 32768, h100).max_threads, 256);
  EXPECT_EQ(ChoosePlan(64, 32768, h100).cluster, 8);
  EXPECT_EQ(ChoosePlan(64, 32768, h100).max_threads, 256);
  EXPECT_EQ(ChoosePlan(64, 50000, h100).cluster, 8);
  EXPECT_EQ(ChoosePlan(64, 50000, h100).max_threads, 256);  // 512 blocks: more than SMs
  EXPECT_EQ(ChoosePlan(1, 128256, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(1, 128256, h100).max_threads, 512);  // 16 wide blocks
  EXPECT_EQ(ChoosePlan(4, 128256, h100).max_threads, 512);
  EXPECT_EQ(ChoosePlan(16, 128256, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(16, 128256, h100).max_threads, 256);
  EXPECT_EQ(ChoosePlan(64, 128256, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(64, 128256, h100).max_threads, 256);
  // Rows that 16 blocks of 256 threads cannot cache take 512 (the launcher
  // would otherwise fall back to streaming them one block a row).
  EXPECT_EQ(ChoosePlan(16, 152064, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(16, 152064, h100).max_threads, 512);
  EXPECT_EQ(ChoosePlan(64, 256000, h100).max_threads, 512);
  EXPECT_EQ(ChoosePlan(2, 200000, h100).cluster, 16);   // 16 blocks still cache it
  EXPECT_EQ(ChoosePlan(2, 1 << 20, h100).cluster, 0);   // past 16 blocks: streams
  for (int64_t rows : {1, 7, 16, 64, 131, 132, 1000})
    for (int64_t vocab : {4096, 4097, 32000, 50257, 128256, 131073, 152064, 200000, 262144}) {
      const cuda::softmax::Plan plan = ChoosePlan(rows, vocab, h100);
      const int c = plan.cluster;
      EXPECT_TRUE(c == 0 || (c >= 2 && c <= cuda::softmax::kMaxCluster && (c & (c - 1)) == 0));
      if (c) {  // the cluster's blocks cache the row at the plan's block size
        EXPECT_GE(int64_t{c} * plan.max_threads * cuda::softmax::kMaxCached, vocab)
            << rows << "x" << vocab;
      }
    }
}

}  // namespace
}  // namespace kerneld::testing
