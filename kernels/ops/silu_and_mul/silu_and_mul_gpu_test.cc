// silu_and_mul on CUDA against the CPU implementation and the float64 reference:
// dtypes x rows x d with tails, aligned and misaligned views (vector and
// scalar paths), large shapes, wide rows at few tokens (a row split over
// blocks) and a row past the grid's limit.
#include "act_and_mul_gpu_cases.h"

namespace kerneld::testing {
namespace {

class ActGpuTest : public ::testing::TestWithParam<ActGpuParam> {};

TEST_P(ActGpuTest, MatchesCpuAndReference) { CheckActParam(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, ActGpuTest, ActGpuSweep("silu_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(Large, ActGpuTest, ActGpuLarge("silu_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(ManyRows, ActGpuTest, ActGpuManyRows("silu_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(WideRows, ActGpuTest, ActGpuWideRows("silu_and_mul"), ActGpuName);

// A row wider than 65535 blocks of 256 elements (grid.y's hardware limit):
// the plan clamps the grid and each thread walks the rest of the row.
// float16 on the scalar path (odd d), the cheapest way past the limit: one
// row of 2 x 16.8M elements.
TEST(ActGpu, RowWiderThanTheGrid) {
  const int64_t d = int64_t{65535} * 256 + 1001;
  std::mt19937_64 rng(3);
  HostTensors in = {{"x", Random(DType::kFloat16, {1, 2 * d}, rng, -6, 6)}};
  OpRun gpu = RunOnCuda("silu_and_mul", in, {});
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("silu_and_mul", in, {}, gpu.outputs), "");
}

TEST(ActGpu, LeadingDimsAndSaturation) { ExpectActLeadingDimsAndSaturationOnCuda("silu_and_mul"); }

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
