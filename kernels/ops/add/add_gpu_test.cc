// add on CUDA against the CPU implementation and the float64 reference:
// dtypes x tail sizes (and the bench's 1 x 4096 and 16 x 128256), in place,
// misaligned views (the scalar head and tail around the vector body),
// poisoned outputs.
#include "gpu_util.h"
#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

class AddGpuTest
    : public ::testing::TestWithParam<std::tuple<DType, int64_t, bool, size_t>> {};

TEST_P(AddGpuTest, MatchesCpuAndReference) {
  auto [dt, n, in_place, misalign] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(n) * 131 + misalign);
  HostTensors in = {{"a", Random(dt, {n}, rng, -100, 100)},
                    {"b", Random(dt, {n}, rng, -100, 100)}};
  OpRun gpu = RunOnCuda("add", in, {}, "cuda", in_place ? "y" : "", misalign * ItemSize(dt));
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("add", in, {}, gpu.outputs), "");
  OpRun cpu = RunOnCpu("add", in, {});
  ASSERT_TRUE(cpu.status.ok());
  // Both round the same float32 sum once: bit-identical.
  EXPECT_EQ(cpu.outputs["y"].values, gpu.outputs["y"].values);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, AddGpuTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{7}, int64_t{127}, int64_t{128},
                                         int64_t{4096}, int64_t{4097}, int64_t{16} * 128256,
                                         int64_t{1} << 22, (int64_t{1} << 24) + 3),
                       ::testing::Bool(), ::testing::Values(size_t{0}, size_t{1}, size_t{3})));

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
