// rmsnorm on CUDA against the CPU implementation and the float64 reference:
// dtypes x rows x hidden sizes with tails, in place and not, aligned and misaligned views
// (the vector and the scalar paths), rows too wide for the register cache,
// large shapes, every launch plan.
#include "norm_gpu_cases.h"

namespace kerneld::testing {
namespace {

class NormGpuTest : public ::testing::TestWithParam<NormGpuParam> {};

TEST_P(NormGpuTest, MatchesCpuAndReference) { CheckNormParam(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, NormGpuTest, NormGpuSweep("rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Wide, NormGpuTest, NormGpuWide("rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(Large, NormGpuTest, NormGpuLarge("rmsnorm"), NormGpuName);
INSTANTIATE_TEST_SUITE_P(ManyRows, NormGpuTest, NormGpuManyRows("rmsnorm"), NormGpuName);

// rmsnorm's launch plans (ops/rmsnorm/cuda.cuh, RowPlanFor) by 16-byte
// packs a row, float16 / bfloat16 (float32): 2048 is 256 packs, the shared
// plan (512: 256 threads x 2, persistent); 2056 is 257 (514), a partial
// second pack a thread; 4096 is 512 (1024); 4104 is 513 (1026, the shared
// plan); 8192 is 1024 (2048, the shared plan); 8200 is 1025 (2050), the
// shared plan. 1 and 16 rows take the few-rows plans; 1031 rows is at least
// 4 rows an SM on any GPU up to 257 SMs (the 256 x 4 plan for 513-1024
// packs) and more rows than the persistent grid, not a multiple of it, so
// its blocks run one or two rows.
INSTANTIATE_TEST_SUITE_P(
    RmsNormPlans, NormGpuTest,
    ::testing::Combine(::testing::Values(std::string("rmsnorm")), NormGpuDTypes(),
                       ::testing::Values(int64_t{1}, int64_t{16}, int64_t{1031}),
                       ::testing::Values(int64_t{2048}, int64_t{2056}, int64_t{4096}, int64_t{4104},
                                         int64_t{8192}, int64_t{8200}),
                       ::testing::Bool(), ::testing::Values(size_t{0})),
    NormGpuName);

TEST(RmsNormGpu, GemmaWeightBiasAndEps) {
  const AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
  for (DType dt : FloatTypes()) {
    CheckNorm("rmsnorm", dt, {17, 2048}, false, 0, attrs);
    // weight_bias through each of rmsnorm's launch plans (RmsNormPlans).
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{17, 4096}, {17, 8192}, {1031, 4096}, {1031, 8192}})
      CheckNorm("rmsnorm", dt, shape, false, 0, attrs);
  }
}

TEST(RmsNormGpu, LeadingDims) {
  for (DType dt : FloatTypes()) CheckNorm("rmsnorm", dt, {2, 3, 5, 256}, false, 0);
}

TEST(RmsNormGpu, EmptyIsANoOp) { ExpectNormEmptyIsANoOpOnCuda("rmsnorm"); }

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
