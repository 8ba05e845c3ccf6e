// The gated activations' CPU cases (silu_and_mul, gelu_and_mul,
// gelu_tanh_and_mul), each run by the op's own test in its folder
// (kernels/ops/<op>/<op>_test.cc): one sweep of dtypes x rows x d with
// tails, and the checks the three ops share.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "row_op_inputs.h"

namespace kerneld::testing {

// op, dtype, rows, d (x is [rows, 2 * d]).
using ActParam = std::tuple<std::string, DType, int64_t, int64_t>;

inline std::string ActName(const ::testing::TestParamInfo<ActParam>& p) {
  auto [op, dtype, rows, d] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x2x" + std::to_string(d);
}

inline auto ActSweep(const std::string& op) {
  return ::testing::Combine(::testing::Values(op),
                            ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                            ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
                            ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128}, int64_t{4095},
                                              int64_t{4096}, int64_t{4097}));
}

// Random data, poisoned outputs, against the float64 reference.
inline void ExpectActMatchesReference(const ActParam& param) {
  auto [op, dtype, rows, d] = param;
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7919 + d * 31 + static_cast<int>(dtype)));
  HostTensors in = {{"x", Random(dtype, {rows, 2 * d}, rng, -4, 4)}};
  OpRun r = RunOnCpu(op, in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{rows, d}));
  EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "");
}

// x [2, 3, 128] at a one-element offset: the rows are every leading index,
// and the views lose their 16-byte alignment.
inline void ExpectActLeadingDimsAndMisalignedViews(const std::string& op) {
  std::mt19937_64 rng(21);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"x", Random(dt, {2, 3, 2 * 64}, rng, -4, 4)}};
    OpRun r = RunOnCpu(op, in, {}, "", ItemSize(dt));
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{2, 3, 64}));
    EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "") << op << " " << DTypeName(dt);
  }
}

// |gate| up to 30: exp(-a) overflows for silu's large negative a, erf and
// tanh saturate; the results must still match the reference.
inline void ExpectActSaturatingInputsMatch(const std::string& op) {
  std::mt19937_64 rng(22);
  for (DType dt : FloatTypes()) {
    HostTensors in = {{"x", Random(dt, {8, 2 * 512}, rng, -30, 30)}};
    OpRun r = RunOnCpu(op, in, {});
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "") << op << " " << DTypeName(dt);
  }
}

inline void ExpectActOddLastDimRejected(const std::string& op) {
  std::mt19937_64 rng(23);
  HostTensors in = {{"x", Random(DType::kFloat16, {4, 4095}, rng)}};
  Status st = RunOnCpu(op, in, {}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), op + ": 'x' dim 1 ('2*d'): expected a multiple of 2, got 4095");
}

inline void ExpectActEmptyIsANoOp(const std::string& op) {
  std::mt19937_64 rng(24);
  OpRun r = RunOnCpu(op, {{"x", Random(DType::kBFloat16, {0, 16}, rng)}}, {});
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  r = RunOnCpu(op, {{"x", Random(DType::kBFloat16, {3, 0}, rng)}}, {});
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
}

}  // namespace kerneld::testing
