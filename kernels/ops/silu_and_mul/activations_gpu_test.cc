// silu_and_mul, gelu_and_mul and gelu_tanh_and_mul on CUDA against the CPU
// implementation and the float64 reference: dtypes x rows x d with tails,
// aligned and misaligned views (vector and scalar paths), large shapes, wide
// rows at few tokens (a row split over blocks) and a row past the grid's limit.
#include "gpu_util.h"
#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

using ActParam = std::tuple<std::string, DType, int64_t, int64_t, size_t>;

class ActGpuTest : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActGpuTest, MatchesCpuAndReference) {
  auto [op, dt, rows, d, misalign] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7919 + d * 31 + static_cast<int>(dt)));
  HostTensors in = {{"x", Random(dt, {rows, 2 * d}, rng, -6, 6)}};
  OpRun gpu = RunOnCuda(op, in, {}, "cuda", "", misalign * ItemSize(dt));
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(gpu.outputs["y"].shape, (std::vector<int64_t>{rows, d}));
  EXPECT_EQ(CheckAgainstReference(op, in, {}, gpu.outputs), "");
  OpRun cpu = RunOnCpu(op, in, {});
  ASSERT_TRUE(cpu.status.ok());
  // Same formula (cpu/activation_math.h); CUDA's expf/erfcf and glibc's
  // differ by an ulp or two.
  EXPECT_EQ(CompareRuns(cpu, gpu), "");
}

std::string ActName(const ::testing::TestParamInfo<ActParam>& p) {
  auto [op, dt, rows, d, misalign] = p.param;
  return op + "_" + DTypeLabel(dt) + "_" + std::to_string(rows) + "x2x" + std::to_string(d) +
         (misalign ? "_misaligned" : "");
}

const auto kDTypes = ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32);

INSTANTIATE_TEST_SUITE_P(
    Sweep, ActGpuTest,
    ::testing::Combine(::testing::ValuesIn(ActOps()), kDTypes,
                       ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
                       ::testing::Values(int64_t{1}, int64_t{4}, int64_t{8}, int64_t{127},
                                         int64_t{128}, int64_t{4095}, int64_t{4096}, int64_t{4097}),
                       ::testing::Values(size_t{0}, size_t{1})),
    ActName);

// The benchmark's mid shape (x 4096 x 4096), and many short rows (32 rows
// per block).
INSTANTIATE_TEST_SUITE_P(Large, ActGpuTest,
                         ::testing::Combine(::testing::ValuesIn(ActOps()), kDTypes,
                                            ::testing::Values(int64_t{4096}),
                                            ::testing::Values(int64_t{2048}),
                                            ::testing::Values(size_t{0})),
                         ActName);
INSTANTIATE_TEST_SUITE_P(ManyRows, ActGpuTest,
                         ::testing::Combine(::testing::ValuesIn(ActOps()), kDTypes,
                                            ::testing::Values(int64_t{70000}),
                                            ::testing::Values(int64_t{8}),
                                            ::testing::Values(size_t{0}, size_t{1})),
                         ActName);

// Wide rows at few tokens (the gated MLP of Llama-3-70B at decode, [T,
// 2 x 28672]): a row split over many blocks side by side. 28672 fills whole
// 256-pack blocks; 14344 (float16: 1793 packs) leaves one pack in the last
// block; 14337 is odd, the scalar path (56 full blocks and one element).
// Misaligned views take the scalar path at every width.
INSTANTIATE_TEST_SUITE_P(WideRows, ActGpuTest,
                         ::testing::Combine(::testing::ValuesIn(ActOps()), kDTypes,
                                            ::testing::Values(int64_t{1}, int64_t{3}, int64_t{16}),
                                            ::testing::Values(int64_t{28672}, int64_t{14344},
                                                              int64_t{14337}),
                                            ::testing::Values(size_t{0}, size_t{1})),
                         ActName);

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

TEST(ActGpu, LeadingDimsAndSaturation) {
  std::mt19937_64 rng(2);
  for (const std::string& op : ActOps()) {
    for (DType dt : FloatTypes()) {
      HostTensors in = {{"x", Random(dt, {2, 3, 2 * 512}, rng, -30, 30)}};
      OpRun gpu = RunOnCuda(op, in, {});
      ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
      EXPECT_EQ(gpu.outputs["y"].shape, (std::vector<int64_t>{2, 3, 512}));
      EXPECT_EQ(CheckAgainstReference(op, in, {}, gpu.outputs), "") << op << " " << DTypeName(dt);
    }
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
