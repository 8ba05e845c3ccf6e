// The norm ops' CUDA cases (rmsnorm, fused_add_rmsnorm, layernorm), each
// run by the op's own gpu test in its folder (kernels/ops/<op>/
// <op>_gpu_test.cc): CUDA against the CPU implementation and the float64
// reference, over the sweeps the three ops share.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_util.h"
#include "row_op_inputs.h"

namespace kerneld::testing {

// Runs op on CUDA and the CPU; checks CUDA against the reference and the CPU.
inline void CheckNorm(const std::string& op, DType dt, const std::vector<int64_t>& shape,
                      bool in_place, size_t misalign_elems, const AttrMap& attrs = {}) {
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

// op, dtype, rows, hidden size, in place, misalignment in elements.
using NormGpuParam = std::tuple<std::string, DType, int64_t, int64_t, bool, size_t>;

inline void CheckNormParam(const NormGpuParam& p) {
  auto [op, dtype, rows, h, in_place, misalign] = p;
  CheckNorm(op, dtype, {rows, h}, in_place, misalign);
}

inline std::string NormGpuName(const ::testing::TestParamInfo<NormGpuParam>& p) {
  auto [op, dtype, rows, h, in_place, misalign] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x" + std::to_string(h) +
         (in_place ? "_inplace" : "") + (misalign ? "_misaligned" : "");
}

inline auto NormGpuDTypes() {
  return ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32);
}

// Dtypes x rows x hidden sizes with tails, in place and not, aligned and
// misaligned views (the vector and the scalar paths).
inline auto NormGpuSweep(const std::string& op) {
  return ::testing::Combine(
      ::testing::Values(op), NormGpuDTypes(),
      ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
      ::testing::Values(int64_t{1}, int64_t{8}, int64_t{127}, int64_t{128}, int64_t{1024},
                        int64_t{4095}, int64_t{4096}, int64_t{4097}),
      ::testing::Bool(), ::testing::Values(size_t{0}, size_t{1}));
}

// Rows wider than the register cache (more than 4 vectors or 8 elements per
// thread of a 1024-thread block) take the streaming kernels; 8192 is the
// widest cached scalar row, 32768 halves the widest cached vector row.
inline auto NormGpuWide(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), NormGpuDTypes(), ::testing::Values(int64_t{5}),
                            ::testing::Values(int64_t{8192}, int64_t{8193}, int64_t{20000},
                                              int64_t{32768}, int64_t{65536}),
                            ::testing::Values(false), ::testing::Values(size_t{0}, size_t{1}));
}

// The benchmark's mid shape.
inline auto NormGpuLarge(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), NormGpuDTypes(),
                            ::testing::Values(int64_t{4096}), ::testing::Values(int64_t{4096}),
                            ::testing::Values(false), ::testing::Values(size_t{0}));
}

// Many short rows (8 rows per block; the grid's last block is partial).
inline auto NormGpuManyRows(const std::string& op) {
  return ::testing::Combine(::testing::Values(op), NormGpuDTypes(),
                            ::testing::Values(int64_t{65537}), ::testing::Values(int64_t{64}),
                            ::testing::Values(false), ::testing::Values(size_t{0}));
}

inline void ExpectNormEmptyIsANoOpOnCuda(const std::string& op) {
  std::mt19937_64 rng(1);
  for (int64_t h : {64, 4096, 8192}) {
    OpRun r = RunOnCuda(op, NormInputs(op, DType::kFloat16, {0, h}, rng), {});
    EXPECT_TRUE(r.status.ok()) << op << " h=" << h << ": " << r.status.ToString();
  }
}

}  // namespace kerneld::testing
