// layernorm on CUDA against the CPU implementation and the float64 reference:
// dtypes x rows x hidden sizes with tails, in place and not, aligned and misaligned views
// (the vector and the scalar paths), rows too wide for the register cache,
// large shapes.
#include "norm_gpu_cases.h"

namespace kerneld::testing {
namespace {

class NormGpuTest : public ::testing::TestWithParam<NormGpuParam> {};

TEST_P(NormGpuTest, MatchesCpuAndReference) { CheckNormParam(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, NormGpuTest, NormGpuSweep("layernorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Wide, NormGpuTest, NormGpuWide("layernorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Large, NormGpuTest, NormGpuLarge("layernorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(ManyRows, NormGpuTest, NormGpuManyRows("layernorm"), NormGpuName);

TEST(LayerNormGpu, Eps) {
  for (DType dt : FloatTypes()) CheckNorm("layernorm", dt, {17, 2048}, true, 0, {{"eps", 1e-3}});
}

TEST(LayerNormGpu, LeadingDims) {
  for (DType dt : FloatTypes()) CheckNorm("layernorm", dt, {2, 3, 5, 256}, false, 0);
}

TEST(LayerNormGpu, EmptyIsANoOp) { ExpectNormEmptyIsANoOpOnCuda("layernorm"); }

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
