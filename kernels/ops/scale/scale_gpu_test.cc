// scale on CUDA against the CPU implementation and the float64 reference:
// dtypes x tail sizes, in place, misaligned views, poisoned outputs.
#include "gpu_util.h"

namespace kerneld::testing {
namespace {

class ScaleGpuTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool, size_t>> {};

TEST_P(ScaleGpuTest, MatchesCpuAndReference) {
  auto [dtype, n, in_place, misalign] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 131 + misalign);
  HostTensors in = {{"x", Random(dtype, {n}, rng, -100, 100)}};
  AttrMap attrs = {{"factor", -3.14}};
  OpRun gpu = RunOnCuda("scale", in, attrs, "cuda", in_place ? "y" : "", misalign * ItemSize(dtype));
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("scale", in, attrs, gpu.outputs), "");
  OpRun cpu = RunOnCpu("scale", in, attrs);
  ASSERT_TRUE(cpu.status.ok());
  // Both round the same float32 product once: bit-identical.
  EXPECT_EQ(cpu.outputs["y"].values, gpu.outputs["y"].values);
}

INSTANTIATE_TEST_SUITE_P(Sweep, ScaleGpuTest,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                                            ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128},
                                                              int64_t{4097}, int64_t{1} << 22),
                                            ::testing::Bool(), ::testing::Values(size_t{0}, size_t{1})));

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
