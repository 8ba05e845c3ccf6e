// silu_and_mul, gelu_and_mul and gelu_tanh_and_mul on the CPU against the
// float64 references: dtypes x rows x d with tails, random data, poisoned
// outputs; leading dims, misaligned views, saturating inputs, errors.
#include <gtest/gtest.h>

#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

using ActParam = std::tuple<std::string, DType, int64_t, int64_t>;

class ActTest : public ::testing::TestWithParam<ActParam> {};

TEST_P(ActTest, MatchesFloat64Reference) {
  auto [op, dtype, rows, d] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7919 + d * 31 + static_cast<int>(dtype)));
  HostTensors in = {{"x", Random(dtype, {rows, 2 * d}, rng, -4, 4)}};
  OpRun r = RunOnCpu(op, in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{rows, d}));
  EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "");
}

std::string ActName(const ::testing::TestParamInfo<ActParam>& p) {
  auto [op, dtype, rows, d] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x2x" + std::to_string(d);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, ActTest,
    ::testing::Combine(::testing::ValuesIn(ActOps()),
                       ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                       ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127}),
                       ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128}, int64_t{4095},
                                         int64_t{4096}, int64_t{4097})),
    ActName);

TEST(ActAndMul, LeadingDimsAndMisalignedViews) {
  std::mt19937_64 rng(21);
  for (const std::string& op : ActOps()) {
    for (DType dt : FloatTypes()) {
      HostTensors in = {{"x", Random(dt, {2, 3, 2 * 64}, rng, -4, 4)}};
      OpRun r = RunOnCpu(op, in, {}, "", ItemSize(dt));
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{2, 3, 64}));
      EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "") << op << " " << DTypeName(dt);
    }
  }
}

TEST(ActAndMul, SaturatingInputs) {
  // |gate| up to 30: exp(-a) overflows for silu's large negative a, erf and
  // tanh saturate; the results must still match the reference.
  std::mt19937_64 rng(22);
  for (const std::string& op : ActOps()) {
    for (DType dt : FloatTypes()) {
      HostTensors in = {{"x", Random(dt, {8, 2 * 512}, rng, -30, 30)}};
      OpRun r = RunOnCpu(op, in, {});
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs), "") << op << " " << DTypeName(dt);
    }
  }
  HostTensor x;
  x.dtype = DType::kFloat32;
  x.shape = {1, 4};
  x.values = {-200.0, 200.0, 3.0, 5.0};  // gates, then ups
  OpRun r = RunOnCpu("silu_and_mul", {{"x", x}}, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["y"].values[0], 0.0);  // -200 * sigmoid(-200) * 3 = -0
  EXPECT_EQ(r.outputs["y"].values[1], 1000.0);
}

TEST(ActAndMul, OddLastDimIsRejected) {
  std::mt19937_64 rng(23);
  for (const std::string& op : ActOps()) {
    HostTensors in = {{"x", Random(DType::kFloat16, {4, 4095}, rng)}};
    Status st = RunOnCpu(op, in, {}).status;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), op + ": 'x' dim 1 ('2*d'): expected a multiple of 2, got 4095");
  }
  HostTensors scalar = {{"x", Random(DType::kFloat32, {}, rng)}};
  Status st = RunOnCpu("gelu_and_mul", scalar, {}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("rank >= 1"), std::string::npos) << st.message();
  HostTensors ints = {{"x", Random(DType::kInt8, {2, 8}, rng, 0, 5)}};
  EXPECT_EQ(RunOnCpu("silu_and_mul", ints, {}).status.message(),
            "silu_and_mul: 'x' dtype int8 not in {float16, bfloat16, float32}");
}

TEST(ActAndMul, EmptyIsANoOp) {
  std::mt19937_64 rng(24);
  for (const std::string& op : ActOps()) {
    OpRun r = RunOnCpu(op, {{"x", Random(DType::kBFloat16, {0, 16}, rng)}}, {});
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    r = RunOnCpu(op, {{"x", Random(DType::kBFloat16, {3, 0}, rng)}}, {});
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  }
}

}  // namespace
}  // namespace kerneld::testing
