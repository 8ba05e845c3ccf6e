// softmax on CUDA against the CPU implementation and the float64 reference:
// dtypes x shapes covering the register-cached kernel (vector and scalar
// packs), the streaming kernel (rows longer than 16384) and odd vocabularies,
// temperatures, and offsets that break 16-byte alignment.
#include "gpu_util.h"

namespace kerneld::testing {
namespace {

class SoftmaxGpuTest
    : public ::testing::TestWithParam<std::tuple<DType, std::pair<int64_t, int64_t>, double, bool>> {};

TEST_P(SoftmaxGpuTest, MatchesCpuAndReference) {
  auto [dtype, shape, temperature, misaligned] = GetParam();
  auto [rows, vocab] = shape;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7 + vocab));
  HostTensors in = {{"logits", Random(dtype, {rows, vocab}, rng, -8, 8)}};
  AttrMap attrs = {{"temperature", temperature}};
  // 4 bytes: the float32 output stays element-aligned, 16-byte alignment breaks.
  OpRun gpu = RunOnCuda("softmax", in, attrs, "cuda", "", misaligned ? 4 : 0);
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("softmax", in, attrs, gpu.outputs), "");
  OpRun cpu = RunOnCpu("softmax", in, attrs);
  ASSERT_TRUE(cpu.status.ok());
  auto c = Compare(gpu.outputs["probs"].values, cpu.outputs["probs"].values, 1e-5, 1e-5);
  EXPECT_EQ(c.mismatches, 0) << "max abs err vs cpu " << c.max_abs_err;
}

std::string SoftmaxName(const ::testing::TestParamInfo<SoftmaxGpuTest::ParamType>& info) {
  const auto& [dt, shape, t, mis] = info.param;
  return std::string(DTypeName(dt)) + "_" + std::to_string(shape.first) + "x" + std::to_string(shape.second) + "_t" +
         std::to_string(static_cast<int>(t * 10)) + (mis ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, SoftmaxGpuTest,
    ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 127},
                                         std::pair<int64_t, int64_t>{2, 4097}, std::pair<int64_t, int64_t>{64, 8192},
                                         std::pair<int64_t, int64_t>{4, 16384}, std::pair<int64_t, int64_t>{3, 16392},
                                         std::pair<int64_t, int64_t>{4, 50257}, std::pair<int64_t, int64_t>{2, 131072}),
                       ::testing::Values(1.0, 0.7), ::testing::Bool()),
    SoftmaxName);

TEST(SoftmaxGpu, ManyRowsAndHugeLogits) {
  std::mt19937_64 rng(5);
  HostTensors in = {{"logits", Random(DType::kBFloat16, {4096, 257}, rng, -300, 300)}};
  OpRun gpu = RunOnCuda("softmax", in, {});
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("softmax", in, {}, gpu.outputs), "");
  HostTensors big;
  big["logits"] = {DType::kFloat32, {2, 3}, {1000, 999, -1000, -3e38, 3e38, 0}};
  gpu = RunOnCuda("softmax", big, {});
  ASSERT_TRUE(gpu.status.ok());
  EXPECT_EQ(CheckAgainstReference("softmax", big, {}, gpu.outputs), "");
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
