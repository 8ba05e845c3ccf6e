// softmax on CUDA against the CPU implementation and the float64 reference:
// dtypes x shapes covering the register-cached kernel (vector and scalar
// packs), the streaming kernel (rows longer than 16384) and odd vocabularies,
// temperatures, and offsets that break 16-byte alignment. The split-row
// (cluster) path is forced at every cluster size on tails and decode shapes,
// and the chooser's pick is checked to run (sm_90+).
#include <cmath>

#include "gpu_util.h"
#include "ops/softmax/plan.h"

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


// Forces the launch plan for the scope (the launcher reads it per call).
struct ForcePlan {
  ForcePlan(int cluster, int threads = 0) {
    cuda::softmax::g_force_cluster = cluster;
    cuda::softmax::g_force_threads = threads;
  }
  ~ForcePlan() {
    cuda::softmax::g_force_cluster = -1;
    cuda::softmax::g_force_threads = 0;
  }
};

bool HaveClusters() { return GpuInfo().compute_capability >= 90; }

// Per row (cluster 0) and split rows over clusters of 2..16 blocks (raised
// to what caches a row), at tails and decode shapes, with NaN-poisoned
// outputs (RunOnCuda): every element must be written and match float64.
class SoftmaxPathTest
    : public ::testing::TestWithParam<std::tuple<int, DType, std::pair<int64_t, int64_t>, bool>> {};

TEST_P(SoftmaxPathTest, MatchesReference) {
  auto [cluster, dtype, shape, misaligned] = GetParam();
  auto [rows, vocab] = shape;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 31 + vocab + cluster));
  HostTensors in = {{"logits", Random(dtype, {rows, vocab}, rng, -8, 8)}};
  AttrMap attrs = {{"temperature", 0.7}};
  const int64_t before = cuda::softmax::g_cluster_launches.load();
  OpRun gpu;
  {
    ForcePlan force(cluster);
    gpu = RunOnCuda("softmax", in, attrs, "cuda", "", misaligned ? 4 : 0);
  }
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference("softmax", in, attrs, gpu.outputs), "");
  const int64_t launched = cuda::softmax::g_cluster_launches.load() - before;
  if (cluster == 0) {
    EXPECT_EQ(launched, 0);
  } else if (HaveClusters()) {
    EXPECT_EQ(launched, 1) << "the split-row kernel did not run";
  }
}

std::string PathName(const ::testing::TestParamInfo<SoftmaxPathTest::ParamType>& info) {
  const auto& [c, dt, shape, mis] = info.param;
  return "c" + std::to_string(c) + "_" + std::string(DTypeName(dt)) + "_" + std::to_string(shape.first) + "x" +
         std::to_string(shape.second) + (mis ? "_misaligned" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Paths, SoftmaxPathTest,
    ::testing::Combine(::testing::Values(0, 2, 4, 8, 16),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(std::pair<int64_t, int64_t>{1, 1}, std::pair<int64_t, int64_t>{3, 127},
                                         std::pair<int64_t, int64_t>{2, 4097}, std::pair<int64_t, int64_t>{1, 32000},
                                         std::pair<int64_t, int64_t>{16, 128256},
                                         std::pair<int64_t, int64_t>{64, 50000},
                                         std::pair<int64_t, int64_t>{3, 50257}),
                       ::testing::Bool()),
    PathName);

// Narrower split-row blocks (more items a thread, more blocks a row).
TEST(SoftmaxGpu, SplitRowNarrowBlocks) {
  std::mt19937_64 rng(9);
  for (int threads : {32, 128, 256}) {
    for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{2, 4097}, std::pair<int64_t, int64_t>{4, 32000}}) {
      HostTensors in = {{"logits", Random(DType::kFloat16, {rows, vocab}, rng, -8, 8)}};
      ForcePlan force(4, threads);
      OpRun gpu = RunOnCuda("softmax", in, {});
      ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
      EXPECT_EQ(CheckAgainstReference("softmax", in, {}, gpu.outputs), "") << threads << " threads";
    }
  }
}

// The chooser's own pick runs and matches the reference: decode shapes
// split rows on sm_90+ (plan.h's ChoosePlan), many short rows stay one block
// a row.
TEST(SoftmaxGpu, ChooserPicksSplitRowsAtDecodeShapes) {
  std::mt19937_64 rng(11);
  const DeviceInfo info = GpuInfo();
  cuda::softmax::DeviceCaps caps;
  caps.compute_capability = info.compute_capability;
  caps.sm_count = info.sm_count;
  for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{1, 32000}, std::pair<int64_t, int64_t>{16, 128256},
                             std::pair<int64_t, int64_t>{64, 50000}, std::pair<int64_t, int64_t>{16, 4096},
                             std::pair<int64_t, int64_t>{1024, 4096}, std::pair<int64_t, int64_t>{4, 1000},
                             std::pair<int64_t, int64_t>{64, 32768}, std::pair<int64_t, int64_t>{4, 128256},
                             std::pair<int64_t, int64_t>{64, 128256}}) {
    const bool want_split = cuda::softmax::ChoosePlan(rows, vocab, caps).cluster >= 2;
    if (HaveClusters() && (vocab == 32000 || vocab == 128256 || (vocab == 50000 && rows < info.sm_count))) {
      EXPECT_TRUE(want_split) << rows << "x" << vocab;
    }
    if (vocab <= 4096 && rows >= info.sm_count) {
      EXPECT_FALSE(want_split) << rows << "x" << vocab;
    }
    HostTensors in = {{"logits", Random(DType::kBFloat16, {rows, vocab}, rng, -8, 8)}};
    // Misaligned: one element a pack, up to 32 a thread (the aligned path
    // holds at most 8 packs of 4).
    for (int misalign : {0, 4}) {
      const int64_t before = cuda::softmax::g_cluster_launches.load();
      OpRun gpu = RunOnCuda("softmax", in, {}, "cuda", "", misalign);
      ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
      EXPECT_EQ(CheckAgainstReference("softmax", in, {}, gpu.outputs), "")
          << rows << "x" << vocab << " misalign " << misalign;
      EXPECT_EQ(cuda::softmax::g_cluster_launches.load() > before, want_split) << rows << "x" << vocab;
    }
  }
}

// Huge and -inf logits, split over clusters and per row: whole chunks of
// -inf in a row with finite values (a block, and threads, with no finite
// value) write zeros, not NaN; a row of -inf only comes out NaN (0 / 0) on
// every path, as from the reference (the split path wrote zeros before).
TEST(SoftmaxGpu, SplitRowInfinities) {
  HostTensors in;
  in["logits"] = {DType::kFloat32, {3, 8192}, std::vector<double>(3 * 8192, -INFINITY)};
  in["logits"].values[5] = 1000;
  in["logits"].values[8000] = 999;
  in["logits"].values[8192 + 8191] = 3e38;
  in["logits"].values[8192 + 3] = -3e38;
  in["logits"].values[8192 + 4] = 0;
  for (int cluster : {0, 2, 4, 16}) {
    ForcePlan force(cluster);
    OpRun gpu = RunOnCuda("softmax", in, {});
    ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
    EXPECT_EQ(CheckAgainstReference("softmax", in, {}, gpu.outputs), "") << "cluster " << cluster;
    EXPECT_TRUE(std::isnan(gpu.outputs["probs"].values[2 * 8192 + 77])) << "cluster " << cluster;
  }
}

// A NaN among -inf makes the whole row NaN, as in the reference (its sum is
// NaN), on every path: per row cached (vocab 4096), per row streamed (20000,
// cluster 0) and split. The split and streamed kernels passed over a thread's
// or pack's values when they were only NaN and -inf, so the rest of the row
// came out finite.
TEST(SoftmaxGpu, NanAmongInfinitiesMakesTheRowNan) {
  for (int64_t vocab : {int64_t{4096}, int64_t{20000}}) {
    HostTensors in;
    in["logits"] = {DType::kFloat32, {2, vocab}, std::vector<double>(2 * vocab, -INFINITY)};
    in["logits"].values[5] = 1.0;
    in["logits"].values[vocab - 3] = NAN;  // with -inf only around it
    in["logits"].values[vocab + 7] = 2.0;  // row 1: finite, no NaN
    for (int cluster : {0, 2, 4, 16}) {
      ForcePlan force(cluster);
      for (int misalign : {0, 4}) {
        OpRun gpu = RunOnCuda("softmax", in, {}, "cuda", "", misalign);
        ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
        EXPECT_EQ(CheckAgainstReference("softmax", in, {}, gpu.outputs), "")
            << vocab << " cluster " << cluster << " misalign " << misalign;
        EXPECT_TRUE(std::isnan(gpu.outputs["probs"].values[5])) << vocab << " cluster " << cluster;
        EXPECT_EQ(gpu.outputs["probs"].values[vocab + 7], 1.0) << vocab << " cluster " << cluster;
      }
    }
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
