// gelu_tanh_and_mul on CUDA against the CPU implementation and the float64 reference:
// dtypes x rows x d with tails, aligned and misaligned views (vector and
// scalar paths), large shapes, wide rows at few tokens (a row split over
// blocks).
#include "act_and_mul_gpu_cases.h"

namespace kerneld::testing {
namespace {

class ActGpuTest : public ::testing::TestWithParam<ActGpuParam> {};

TEST_P(ActGpuTest, MatchesCpuAndReference) { CheckActParam(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, ActGpuTest, ActGpuSweep("gelu_tanh_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(Large, ActGpuTest, ActGpuLarge("gelu_tanh_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(ManyRows, ActGpuTest, ActGpuManyRows("gelu_tanh_and_mul"), ActGpuName);
INSTANTIATE_TEST_SUITE_P(WideRows, ActGpuTest, ActGpuWideRows("gelu_tanh_and_mul"), ActGpuName);

TEST(ActGpu, LeadingDimsAndSaturation) {
  ExpectActLeadingDimsAndSaturationOnCuda("gelu_tanh_and_mul");
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
