// The norm ops' CPU cases (rmsnorm, fused_add_rmsnorm, layernorm), each
// run by the op's own test in its folder (kernels/ops/<op>/<op>_test.cc):
// one sweep of dtypes x rows x hidden sizes with tails, and the checks the
// three ops share.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "row_op_inputs.h"

namespace kerneld::testing {

// op, dtype, rows, hidden size, in place.
using NormParam = std::tuple<std::string, DType, int64_t, int64_t, bool>;

inline std::string NormName(const ::testing::TestParamInfo<NormParam>& p) {
  auto [op, dtype, rows, h, in_place] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x" + std::to_string(h) +
         (in_place ? "_inplace" : "");
}

// The sweep of `op`, in place or not as `in_place` allows (fused_add_rmsnorm
// is always in place).
template <typename InPlace>
auto NormSweep(const std::string& op, InPlace in_place) {
  return ::testing::Combine(::testing::Values(op),
                            ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                            ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
                            ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128}, int64_t{4095},
                                              int64_t{4096}, int64_t{4097}),
                            in_place);
}

// Random data, poisoned outputs, against the float64 reference.
inline void ExpectNormMatchesReference(const NormParam& param) {
  auto [op, dtype, rows, h, in_place] = param;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7919 + h * 31 + static_cast<int>(dtype)));
  HostTensors in = NormInputs(op, dtype, {rows, h}, rng);
  OpRun r = RunOnCpu(op, in, {}, NormAlias(op, in_place));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs, NormTol(dtype), NormTol(dtype)), "");
}

// x [2, 3, 64]: the rows are every leading index. A one-element offset
// breaks 16-byte alignment of every tensor; results must not change.
inline void ExpectNormLeadingDimsAndMisalignedViews(const std::string& op, std::mt19937_64& rng) {
  for (DType dt : FloatTypes()) {
    HostTensors in = NormInputs(op, dt, {2, 3, 64}, rng);
    OpRun r = RunOnCpu(op, in, {}, "", ItemSize(dt));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{2, 3, 64}));
    EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs, NormTol(dt), NormTol(dt)), "")
        << op << " " << DTypeName(dt);
  }
}

inline void ExpectNormEmptyRowsAreANoOp(const std::string& op) {
  std::mt19937_64 rng(17);
  HostTensors in = NormInputs(op, DType::kFloat16, {0, 64}, rng);
  OpRun r = RunOnCpu(op, in, {});
  EXPECT_TRUE(r.status.ok()) << op << ": " << r.status.ToString();
}

}  // namespace kerneld::testing
