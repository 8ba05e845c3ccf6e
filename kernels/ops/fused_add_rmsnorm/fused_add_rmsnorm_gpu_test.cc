// fused_add_rmsnorm on CUDA against the CPU implementation and the float64 reference:
// dtypes x rows x hidden sizes with tails, always in place, aligned and misaligned views
// (the vector and the scalar paths), rows too wide for the register cache,
// large shapes.
#include "norm_gpu_cases.h"

namespace kerneld::testing {
namespace {

class NormGpuTest : public ::testing::TestWithParam<NormGpuParam> {};

TEST_P(NormGpuTest, MatchesCpuAndReference) { CheckNormParam(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, NormGpuTest, NormGpuSweep("fused_add_rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Wide, NormGpuTest, NormGpuWide("fused_add_rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Large, NormGpuTest, NormGpuLarge("fused_add_rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(ManyRows, NormGpuTest, NormGpuManyRows("fused_add_rmsnorm"), NormGpuName);

TEST(FusedAddRmsNormGpu, GemmaWeightBiasAndEps) {
  const AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
  for (DType dt : FloatTypes()) CheckNorm("fused_add_rmsnorm", dt, {17, 2048}, true, 1, attrs);
}

TEST(FusedAddRmsNormGpu, EmptyIsANoOp) { ExpectNormEmptyIsANoOpOnCuda("fused_add_rmsnorm"); }

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
