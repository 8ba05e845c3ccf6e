// top_k_mask_logits on the CPU against its float64 reference: dtypes x
// shapes x the forms of 'top_k' (one k as [] or [1], int32 or int64; a k per
// row, keep-all values among them), ties at the boundary, -0 and +0, in
// place, misaligned views, and the error cases. Also the CUDA launch plan
// (host-only).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_runner.h"
#include "ops/top_k_mask_logits/plan.h"
#include "top_k_cases.h"

namespace kerneld::testing {
namespace {

// Every row keeps at least min(k, vocab) values, or all when k keeps all.
void ExpectKeptCounts(const HostTensors& in, const HostTensor& out) {
  const int64_t rows = out.shape[0], v = out.shape[1];
  const HostTensor& k = in.at("top_k");
  for (int64_t r = 0; r < rows; ++r) {
    const auto kr = static_cast<int64_t>(k.values[k.values.size() == 1 ? 0 : r]);
    int64_t kept = 0;
    for (int64_t i = 0; i < v; ++i) kept += out.values[static_cast<size_t>(r * v + i)] != -INFINITY;
    if (kr <= 0 || kr >= v)
      EXPECT_EQ(kept, v) << "row " << r;
    else
      EXPECT_GE(kept, kr) << "row " << r;
  }
}

class TopKMaskLogitsTest : public ::testing::TestWithParam<TopKParam> {};

TEST_P(TopKMaskLogitsTest, MatchesReference) {
  auto [dtype, shape, form] = GetParam();
  auto [rows, vocab] = shape;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 131 + vocab + form));
  HostTensors in = {{"logits", Random(dtype, {rows, vocab}, rng, -8, 8)},
                    {"top_k", TopK(form, rows, vocab, rng)}};
  OpRun r = RunOnCpu("top_k_mask_logits", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const HostTensor& y = r.outputs["masked_logits"];
  EXPECT_EQ(y.dtype, dtype);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{rows, vocab}));
  EXPECT_EQ(CheckAgainstReference("top_k_mask_logits", in, {}, r.outputs, 0, 0), "");
  ExpectKeptCounts(in, y);
}

INSTANTIATE_TEST_SUITE_P(Sweep, TopKMaskLogitsTest, TopKSweep(), TopKName);

TEST(TopKMaskLogits, TiesAtTheBoundaryAreKept) {
  const double inf = std::numeric_limits<double>::infinity();
  HostTensors in = {
      {"logits", {DType::kFloat32, {2, 6}, {3, 1, 3, 2, 3, -inf, 0, -0.0, 1, -1, -inf, 0}}},
      {"top_k", {DType::kInt32, {2}, {2, 3}}}};
  OpRun r = RunOnCpu("top_k_mask_logits", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.outputs["masked_logits"].values,
            (std::vector<double>{3, -inf, 3, -inf, 3, -inf, 0, -0.0, 1, -inf, -inf, 0}));
  EXPECT_EQ(CheckAgainstReference("top_k_mask_logits", in, {}, r.outputs, 0, 0), "");
  // -0 keeps its sign.
  EXPECT_TRUE(std::signbit(r.outputs["masked_logits"].values[7]));
}

TEST(TopKMaskLogits, InPlaceAndMisaligned) {
  std::mt19937_64 rng(3);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"logits", Random(dt, {3, 1001}, rng, -4, 4)},
                      {"top_k", {DType::kInt32, {3}, {1, 40, 0}}}};
    OpRun r = RunOnCpu("top_k_mask_logits", in, {}, "masked_logits");
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("top_k_mask_logits", in, {}, r.outputs, 0, 0), "");
    r = RunOnCpu("top_k_mask_logits", in, {}, "", /*misalign=*/2);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("top_k_mask_logits", in, {}, r.outputs, 0, 0), "");
  }
}

TEST(TopKMaskLogits, EmptyBatchAndVocab) {
  OpRun r = RunOnCpu(
      "top_k_mask_logits",
      {{"logits", {DType::kFloat32, {0, 5}, {}}}, {"top_k", {DType::kInt32, {0}, {}}}}, {});
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  r = RunOnCpu("top_k_mask_logits",
               {{"logits", {DType::kFloat16, {2, 0}, {}}}, {"top_k", {DType::kInt32, {}, {3}}}},
               {});
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
}

TEST(TopKMaskLogits, Errors) {
  std::mt19937_64 rng(2);
  HostTensor x = Random(DType::kFloat32, {2, 8}, rng);
  OpRun r = RunOnCpu("top_k_mask_logits",
                     {{"logits", x}, {"top_k", {DType::kInt32, {3}, {1, 2, 3}}}}, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(),
            "top_k_mask_logits: 'top_k' has shape [3], expected [] or [1] (one k for every row) "
            "or [batch] = [2] (a k per row)");
  r = RunOnCpu("top_k_mask_logits", {{"logits", x}, {"top_k", {DType::kInt32, {2, 1}, {1, 2}}}},
               {});
  EXPECT_EQ(r.status.message(),
            "top_k_mask_logits: 'top_k' has shape [2, 1], expected [] or [1] (one k for every "
            "row) or [batch] = [2] (a k per row)");
  r = RunOnCpu("top_k_mask_logits", {{"logits", x}, {"top_k", {DType::kFloat32, {}, {2}}}}, {});
  EXPECT_EQ(r.status.message(), "top_k_mask_logits: 'top_k' dtype float32 not in {int32, int64}");
  r = RunOnCpu("top_k_mask_logits", {{"logits", x}}, {});
  EXPECT_EQ(r.status.message(), "top_k_mask_logits: missing input 'top_k'");
  r = RunOnCpu(
      "top_k_mask_logits",
      {{"logits", Random(DType::kInt32, {2, 8}, rng, 0, 9)}, {"top_k", {DType::kInt32, {}, {2}}}},
      {});
  EXPECT_EQ(r.status.message(),
            "top_k_mask_logits: 'logits' dtype int32 not in {float16, bfloat16, float32}");
  HostTensor nan = x;
  nan.values[11] = std::nan("");
  r = RunOnCpu("top_k_mask_logits", {{"logits", nan}, {"top_k", {DType::kInt32, {}, {2}}}}, {});
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status.message(), "top_k_mask_logits: logits[1, 3] is NaN");
}

// The CUDA launch plan (host-only): clusters split decode rows on sm_90,
// every plan's blocks cache their row, and rows no cluster caches stream.
TEST(TopKMaskLogits, CudaPlanChooser) {
  using cuda::top_k::ChoosePlan;
  using cuda::top_k::Plan;
  const cuda::top_k::DeviceCaps h100{0, 90, 132}, a100{0, 80, 108};
  EXPECT_EQ(ChoosePlan(1, 128256 / 4, 4, a100).cluster, 0);  // no clusters: streams
  EXPECT_EQ(ChoosePlan(1, 16384 / 4, 4, a100).cluster, 1);   // one block caches 16384
  EXPECT_EQ(ChoosePlan(1, 128256 / 4, 4, h100).cluster, 16);
  // Many rows fill the SMs themselves: the fewest blocks that cache a row.
  EXPECT_EQ(ChoosePlan(64, 128256 / 4, 4, h100).cluster, 8);
  EXPECT_EQ(ChoosePlan(64, 32000 / 4, 4, h100).cluster, 2);
  EXPECT_EQ(ChoosePlan(16, 32000 / 4, 4, h100).cluster, 8);
  EXPECT_EQ(ChoosePlan(16, 128256 / 4, 4, h100).cluster, 16);
  EXPECT_EQ(ChoosePlan(16, 128256 / 8, 8, h100, -1, 16, 2).cluster, 8);  // 2-byte: 2 blocks an SM
  EXPECT_EQ(ChoosePlan(1, 128256 / 8, 8, h100, -1, 16, 2).cluster, 16);
  // A refused 16-block cluster plans again within the portable 8.
  EXPECT_EQ(ChoosePlan(1, 128256 / 8, 8, h100, -1, 8).cluster, 8);
  EXPECT_EQ(ChoosePlan(1, 128256 / 8, 8, h100, -1, 8).items, 4);
  EXPECT_EQ(ChoosePlan(1000, 4096 / 8, 8, h100).cluster, 1);
  EXPECT_EQ(ChoosePlan(2, 1 << 20, 1, h100).cluster, 0);         // past 16 blocks: streams
  EXPECT_EQ(ChoosePlan(64, 128256 / 4, 4, h100, 0).cluster, 0);  // forced to stream
  EXPECT_EQ(ChoosePlan(64, 32000 / 4, 4, h100, 1).cluster, 2);   // forced, raised to what caches
  for (int n : {1, 4, 8})
    for (int64_t rows : {1, 7, 16, 64, 132, 1000})
      for (int64_t vocab : {1, 127, 4096, 32000, 50257, 128256, 152064, 262144}) {
        const Plan p = ChoosePlan(rows, vocab / n, n, h100);
        if (vocab / n == 0) continue;
        if (p.cluster == 0) continue;
        EXPECT_GE(int64_t{p.cluster} * p.threads * p.items, vocab / n) << rows << "x" << vocab;
        EXPECT_LE(p.items * n, cuda::top_k::kMaxKeys);
        EXPECT_TRUE(p.threads % 32 == 0 && p.threads >= 256 && p.threads <= 512);
        EXPECT_TRUE(p.cluster <= 16 && (p.cluster & (p.cluster - 1)) == 0);
      }
}

// The shared-memory plan: 16-bit types on sm_90+, many rows of a long
// vocabulary, the fewest blocks whose parts fit the cache; forced on any
// 16-bit row (raised to what caches it), never against a forced register
// plan, never for float32 or before sm_90.
TEST(TopKMaskLogits, CudaSharedPlanChooser) {
  using cuda::top_k::ChooseSharedCluster;
  const cuda::top_k::DeviceCaps h100{0, 90, 132}, a100{0, 80, 108};
  EXPECT_EQ(ChooseSharedCluster(64, 128256, 2, h100), 2);
  EXPECT_EQ(ChooseSharedCluster(64, 262144, 2, h100), 4);
  EXPECT_EQ(ChooseSharedCluster(64, 128256, 4, h100), 0);  // float32: the register plan
  EXPECT_EQ(ChooseSharedCluster(64, 128256, 2, a100), 0);
  EXPECT_EQ(ChooseSharedCluster(16, 128256, 2, h100), 0);  // few rows: the register plan
  EXPECT_EQ(ChooseSharedCluster(64, 32000, 2, h100), 0);
  EXPECT_EQ(ChooseSharedCluster(64, 128256, 2, h100, 0), 0);      // forced off
  EXPECT_EQ(ChooseSharedCluster(64, 128256, 2, h100, -1, 8), 0);  // a forced register plan
  EXPECT_EQ(ChooseSharedCluster(2, 4096, 2, h100, 1), 1);         // forced, one block caches
  EXPECT_EQ(ChooseSharedCluster(2, 128256, 2, h100, 1), 2);       // raised to what caches
  EXPECT_EQ(ChooseSharedCluster(2, 128256, 2, h100, 4), 4);
  for (int64_t vocab : {65536, 128256, 152064, 262144, 800000}) {
    const int c = ChooseSharedCluster(64, vocab, 2, h100);
    ASSERT_GT(c, 0) << vocab;
    EXPECT_LE((vocab * 2 + c - 1) / c, cuda::top_k::kSharedCacheBytes) << vocab;
    EXPECT_TRUE(c <= 8 && (c & (c - 1)) == 0) << vocab;
  }
  EXPECT_EQ(ChooseSharedCluster(64, 1 << 20, 2, h100), 0);  // 2 MiB rows: past 8 blocks
}

}  // namespace
}  // namespace kerneld::testing
