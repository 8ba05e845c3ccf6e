// rmsnorm, fused_add_rmsnorm and layernorm on CUDA against the CPU
// implementation and the float64 reference: dtypes x rows x hidden sizes
// with tails, in place and not, aligned and misaligned views (the vector and
// the scalar paths), rows too wide for the register cache, large shapes.
#include "gpu_util.h"
#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

// Runs op on CUDA and the CPU; checks CUDA against the reference and the CPU.
void CheckNorm(const std::string& op, DType dt, const std::vector<int64_t>& shape, bool in_place,
               size_t misalign_elems, const AttrMap& attrs = {}) {
  std::mt19937_64 rng(static_cast<uint64_t>(shape.front() * 7919 + shape.back() * 31 +
                                             static_cast<int>(dt) + misalign_elems));
  HostTensors in = NormInputs(op, dt, shape, rng);
  const std::string alias = NormAlias(op, in_place);
  OpRun gpu = RunOnCuda(op, in, attrs, "cuda", alias, misalign_elems * ItemSize(dt));
  ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
  EXPECT_EQ(CheckAgainstReference(op, in, attrs, gpu.outputs, NormTol(dt), NormTol(dt)), "");
  OpRun cpu = RunOnCpu(op, in, attrs, alias);
  ASSERT_TRUE(cpu.status.ok()) << cpu.status.ToString();
  // Same float32 math, different summation order: within the tolerance.
  EXPECT_EQ(CompareRuns(cpu, gpu, NormTol(dt), NormTol(dt)), "");
  if (op == "fused_add_rmsnorm") {
    // residual is x + residual rounded once on both: bit for bit.
    EXPECT_EQ(cpu.outputs["residual"].values, gpu.outputs["residual"].values);
  }
}

using NormParam = std::tuple<std::string, DType, int64_t, int64_t, bool, size_t>;

class NormGpuTest : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormGpuTest, MatchesCpuAndReference) {
  auto [op, dtype, rows, h, in_place, misalign] = GetParam();
  CheckNorm(op, dtype, {rows, h}, in_place, misalign);
}

std::string NormName(const ::testing::TestParamInfo<NormParam>& p) {
  auto [op, dtype, rows, h, in_place, misalign] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x" + std::to_string(h) +
         (in_place ? "_inplace" : "") + (misalign ? "_misaligned" : "");
}

const auto kDTypes = ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32);

INSTANTIATE_TEST_SUITE_P(
    Sweep, NormGpuTest,
    ::testing::Combine(::testing::ValuesIn(NormOps()), kDTypes,
                       ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
                       ::testing::Values(int64_t{1}, int64_t{8}, int64_t{127}, int64_t{128},
                                         int64_t{1024}, int64_t{4095}, int64_t{4096},
                                         int64_t{4097}),
                       ::testing::Bool(), ::testing::Values(size_t{0}, size_t{1})),
    NormName);

// Rows wider than the register cache (more than 4 vectors or 8 elements per
// thread of a 1024-thread block) take the streaming kernels; 8192 is the
// widest cached scalar row, 32768 halves the widest cached vector row.
INSTANTIATE_TEST_SUITE_P(
    Wide, NormGpuTest,
    ::testing::Combine(::testing::ValuesIn(NormOps()), kDTypes,
                       ::testing::Values(int64_t{5}),
                       ::testing::Values(int64_t{8192}, int64_t{8193}, int64_t{20000},
                                         int64_t{32768}, int64_t{65536}),
                       ::testing::Values(false), ::testing::Values(size_t{0}, size_t{1})),
    NormName);

// The benchmark's mid shape, and many short rows (8 rows per block; the
// grid's last block is partial).
INSTANTIATE_TEST_SUITE_P(Large, NormGpuTest,
                         ::testing::Combine(::testing::ValuesIn(NormOps()), kDTypes,
                                            ::testing::Values(int64_t{4096}),
                                            ::testing::Values(int64_t{4096}),
                                            ::testing::Values(false), ::testing::Values(size_t{0})),
                         NormName);
INSTANTIATE_TEST_SUITE_P(ManyRows, NormGpuTest,
                         ::testing::Combine(::testing::ValuesIn(NormOps()), kDTypes,
                                            ::testing::Values(int64_t{65537}),
                                            ::testing::Values(int64_t{64}),
                                            ::testing::Values(false), ::testing::Values(size_t{0})),
                         NormName);

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
    ::testing::Combine(::testing::Values(std::string("rmsnorm")), kDTypes,
                       ::testing::Values(int64_t{1}, int64_t{16}, int64_t{1031}),
                       ::testing::Values(int64_t{2048}, int64_t{2056}, int64_t{4096}, int64_t{4104},
                                         int64_t{8192}, int64_t{8200}),
                       ::testing::Bool(), ::testing::Values(size_t{0})),
    NormName);

TEST(NormGpu, GemmaWeightBiasAndEps) {
  const AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
  for (DType dt : FloatTypes()) {
    CheckNorm("rmsnorm", dt, {17, 2048}, false, 0, attrs);
    CheckNorm("fused_add_rmsnorm", dt, {17, 2048}, true, 1, attrs);
    // weight_bias through each of rmsnorm's launch plans (RmsNormPlans).
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{17, 4096}, {17, 8192}, {1031, 4096}, {1031, 8192}})
      CheckNorm("rmsnorm", dt, shape, false, 0, attrs);
  }
  for (DType dt : FloatTypes()) CheckNorm("layernorm", dt, {17, 2048}, true, 0, {{"eps", 1e-3}});
}

TEST(NormGpu, LeadingDims) {
  for (const std::string op : {"rmsnorm", "layernorm"})
    for (DType dt : FloatTypes()) CheckNorm(op, dt, {2, 3, 5, 256}, false, 0);
}

TEST(NormGpu, EmptyIsANoOp) {
  std::mt19937_64 rng(1);
  for (const std::string& op : NormOps()) {
    for (int64_t h : {64, 4096, 8192}) {
      OpRun r = RunOnCuda(op, NormInputs(op, DType::kFloat16, {0, h}, rng), {});
      EXPECT_TRUE(r.status.ok()) << op << " h=" << h << ": " << r.status.ToString();
    }
  }
}

}  // namespace
}  // namespace kerneld::testing

KERNELD_GPU_TEST_MAIN()
