// The gated activations' CUDA cases (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul), each run by the op's own gpu test in its folder
// (kernels/ops/<op>/<op>_gpu_test.cc): CUDA against the CPU implementation
// and the float64 reference, over the sweeps the three ops share.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_util.h"
#include "row_op_inputs.h"

namespace kerneld::testing {

// op, dtype, rows, d (x is [rows, 2 * d]), misalignment in elements.
using ActGpuParam = std::tuple<std::string, DType, int64_t, int64_t, size_t>;

inline void CheckActParam(const ActGpuParam& p) {
  auto [op, dt, rows, d, misalign] = p;
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

inline std::string ActGpuName(const ::testing::TestParamInfo<ActGpuParam>& p) {
  auto [op, dt, rows, d, misalign] = p.param;
  return op + "_" + DTypeLabel(dt) + "_" + std::to_string(rows) + "x2x" + std::to_string(d) +
         (misalign ? "_misaligned" : "");
}

inline auto ActGpuDTypes() {
  return ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32);
}

// Dtypes x rows x d with tails, aligned and misaligned views (the vector
// and the scalar paths).
inline auto ActGpuSweep(const std::string& op) {
  return ::testing::Combine(
      ::testing::Values(op), ActGpuDTypes(),
      ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
      ::testing::Values(int64_t{1}, int64_t{4}, int64_t{8}, int64_t{127}, int64_t{128},
                        int64_t{4095}, int64_t{4096}, int64_t{4097}),
      ::testing::Values(size_t{0}, size_t{1}));
}

// The benchmark's mid shape (x 4096 x 4096).
inline auto ActGpuLarge(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), ActGpuDTypes(), ::testing::Values(int64_t{4096}),
                            ::testing::Values(int64_t{2048}), ::testing::Values(size_t{0}));
}

// Many short rows (32 rows per block).
inline auto ActGpuManyRows(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), ActGpuDTypes(),
                            ::testing::Values(int64_t{70000}), ::testing::Values(int64_t{8}),
                            ::testing::Values(size_t{0}, size_t{1}));
}

// Wide rows at few tokens (the gated MLP of Llama-3-70B at decode, [T,
// 2 x 28672]): a row split over many blocks side by side. 28672 fills whole
// 256-pack blocks; 14344 (float16: 1793 packs) leaves one pack in the last
// block; 14337 is odd, the scalar path (56 full blocks and one element).
// Misaligned views take the scalar path at every width.
inline auto ActGpuWideRows(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), ActGpuDTypes(),
                            ::testing::Values(int64_t{1}, int64_t{3}, int64_t{16}),
                            ::testing::Values(int64_t{28672}, int64_t{14344}, int64_t{14337}),
                            ::testing::Values(size_t{0}, size_t{1}));
}

// Leading dims, and |gate| up to 30 (exp, erf and tanh saturate).
inline void ExpectActLeadingDimsAndSaturationOnCuda(const std::string& op) {
  std::mt19937_64 rng(2);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"x", Random(dt, {2, 3, 2 * 512}, rng, -30, 30)}};
    OpRun gpu = RunOnCuda(op, in, {});
    ASSERT_TRUE(gpu.status.ok()) << gpu.status.ToString();
    EXPECT_EQ(gpu.outputs["y"].shape, (std::vector<int64_t>{2, 3, 512}));
    EXPECT_EQ(CheckAgainstReference(op, in, {}, gpu.outputs), "") << op << " " << DTypeName(dt);
  }
}

}  // namespace kerneld::testing
