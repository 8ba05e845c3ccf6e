// rmsnorm, fused_add_rmsnorm and layernorm on the CPU against the float64
// references: dtypes x rows x hidden sizes with tails, in place and not,
// random data, poisoned outputs; attrs, misaligned views, leading dims, the
// fused op's rounding order, and the schema's error messages.
#include <gtest/gtest.h>

#include "row_op_inputs.h"

namespace kerneld::testing {
namespace {

using NormParam = std::tuple<std::string, DType, int64_t, int64_t, bool>;

class NormTest : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormTest, MatchesFloat64Reference) {
  auto [op, dtype, rows, h, in_place] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(rows * 7919 + h * 31 + static_cast<int>(dtype)));
  HostTensors in = NormInputs(op, dtype, {rows, h}, rng);
  OpRun r = RunOnCpu(op, in, {}, NormAlias(op, in_place));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs, NormTol(dtype), NormTol(dtype)), "");
}

std::string NormName(const ::testing::TestParamInfo<NormParam>& p) {
  auto [op, dtype, rows, h, in_place] = p.param;
  return op + "_" + DTypeLabel(dtype) + "_" + std::to_string(rows) + "x" + std::to_string(h) +
         (in_place ? "_inplace" : "");
}

const auto kDTypes = ::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32);
const auto kRows = ::testing::Values(int64_t{1}, int64_t{3}, int64_t{127});
const auto kHidden = ::testing::Values(int64_t{1}, int64_t{127}, int64_t{128}, int64_t{4095},
                                       int64_t{4096}, int64_t{4097});

INSTANTIATE_TEST_SUITE_P(Sweep, NormTest,
                         ::testing::Combine(::testing::Values("rmsnorm", "layernorm"), kDTypes,
                                            kRows, kHidden, ::testing::Bool()),
                         NormName);
// fused_add_rmsnorm is always in place.
INSTANTIATE_TEST_SUITE_P(Fused, NormTest,
                         ::testing::Combine(::testing::Values("fused_add_rmsnorm"), kDTypes, kRows,
                                            kHidden, ::testing::Values(true)),
                         NormName);

TEST(RmsNorm, GemmaWeightBiasAndEps) {
  std::mt19937_64 rng(11);
  for (DType dt : FloatTypes()) {
    // Small x so that eps = 0.01 matters; weight near 0 so the bias does.
    HostTensors in = {{"x", Random(dt, {5, 256}, rng, -0.1, 0.1)},
                      {"weight", Random(dt, {256}, rng, -0.5, 0.5)}};
    AttrMap attrs = {{"eps", 1e-2}, {"weight_bias", 1.0}};
    OpRun r = RunOnCpu("rmsnorm", in, attrs);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("rmsnorm", in, attrs, r.outputs, NormTol(dt), NormTol(dt)), "")
        << DTypeName(dt);
    in["residual"] = Random(dt, {5, 256}, rng, -0.1, 0.1);
    r = RunOnCpu("fused_add_rmsnorm", in, attrs);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(CheckAgainstReference("fused_add_rmsnorm", in, attrs, r.outputs, NormTol(dt),
                                    NormTol(dt)),
              "")
        << DTypeName(dt);
  }
}

TEST(Norms, LeadingDimsAndMisalignedViews) {
  std::mt19937_64 rng(12);
  for (const std::string op : {"rmsnorm", "layernorm"}) {
    for (DType dt : FloatTypes()) {
      // x [2, 3, 64]: the rows are every leading index. A one-element offset
      // breaks 16-byte alignment of every tensor; results must not change.
      HostTensors in = NormInputs(op, dt, {2, 3, 64}, rng);
      OpRun r = RunOnCpu(op, in, {}, "", ItemSize(dt));
      ASSERT_TRUE(r.status.ok()) << r.status.ToString();
      EXPECT_EQ(r.outputs["y"].shape, (std::vector<int64_t>{2, 3, 64}));
      EXPECT_EQ(CheckAgainstReference(op, in, {}, r.outputs, NormTol(dt), NormTol(dt)), "")
          << op << " " << DTypeName(dt);
    }
  }
  HostTensors in = NormInputs("fused_add_rmsnorm", DType::kFloat16, {7, 4096}, rng);
  OpRun r = RunOnCpu("fused_add_rmsnorm", in, {}, "", 2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(CheckAgainstReference("fused_add_rmsnorm", in, {}, r.outputs, 1e-2, 1e-2), "");
}

TEST(FusedAddRmsNorm, ResidualIsTheRoundedSumAndTheNormUsesTheFloatSum) {
  std::mt19937_64 rng(13);
  for (DType dt : FloatTypes()) {
    HostTensors in = NormInputs("fused_add_rmsnorm", dt, {9, 1000}, rng);
    OpRun fused = RunOnCpu("fused_add_rmsnorm", in, {});
    ASSERT_TRUE(fused.status.ok()) << fused.status.ToString();
    // residual: x + residual in float32, rounded once -- exactly what add gives.
    OpRun sum = RunOnCpu("add", {{"a", in["x"]}, {"b", in["residual"]}}, {});
    ASSERT_TRUE(sum.status.ok());
    EXPECT_EQ(fused.outputs["residual"].values, sum.outputs["y"].values) << DTypeName(dt);
    if (dt == DType::kFloat32) {
      // In float32 the rounded and unrounded sums agree, so x must equal
      // rmsnorm(add(x, residual)) bit for bit.
      OpRun norm = RunOnCpu("rmsnorm", {{"x", sum.outputs["y"]}, {"weight", in["weight"]}}, {});
      ASSERT_TRUE(norm.status.ok());
      EXPECT_EQ(fused.outputs["x"].values, norm.outputs["y"].values);
    }
  }
}

TEST(LayerNorm, ConstantRowsGiveBeta) {
  HostTensor x;
  x.dtype = DType::kBFloat16;
  x.shape = {2, 512};
  x.values.assign(1024, 0.5);
  std::mt19937_64 rng(14);
  HostTensors in = {{"x", x},
                    {"gamma", Random(DType::kBFloat16, {512}, rng)},
                    {"beta", Random(DType::kBFloat16, {512}, rng)}};
  OpRun r = RunOnCpu("layernorm", in, {});
  ASSERT_TRUE(r.status.ok());
  for (size_t i = 0; i < 1024; ++i) ASSERT_EQ(r.outputs["y"].values[i], in["beta"].values[i % 512]);
}

TEST(LayerNorm, OffsetRowsKeepPrecision) {
  // Mean 4, spread 0.58: E[x^2] - mean^2 would lose ~5 bits in float32; the
  // centred variance keeps float32 within the default tolerance.
  std::mt19937_64 rng(15);
  HostTensors in = {{"x", Random(DType::kFloat32, {4, 4096}, rng, 3, 5)},
                    {"gamma", Random(DType::kFloat32, {4096}, rng)},
                    {"beta", Random(DType::kFloat32, {4096}, rng)}};
  OpRun r = RunOnCpu("layernorm", in, {});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckAgainstReference("layernorm", in, {}, r.outputs), "");
}

TEST(Norms, ErrorMessages) {
  std::mt19937_64 rng(16);
  HostTensors in = {{"x", Random(DType::kFloat16, {2, 4096}, rng)},
                    {"weight", Random(DType::kFloat16, {4095}, rng)}};
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'weight' dim 0 ('hidden_size'): expected 4096, got 4095");
  in["weight"] = Random(DType::kFloat32, {4096}, rng);
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'weight' dtype float32 must equal 'x' dtype float16");
  in["x"] = Random(DType::kInt32, {2, 4096}, rng, 0, 10);
  EXPECT_EQ(RunOnCpu("rmsnorm", in, {}).status.message(),
            "rmsnorm: 'x' dtype int32 not in {float16, bfloat16, float32}");
  in = NormInputs("rmsnorm", DType::kFloat32, {2, 8}, rng);
  Status st = RunOnCpu("rmsnorm", in, {{"epsilon", 1e-5}}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "rmsnorm: unknown attr 'epsilon'; attrs are {eps, weight_bias}");

  in = NormInputs("fused_add_rmsnorm", DType::kBFloat16, {4, 8}, rng);
  in["residual"] = Random(DType::kBFloat16, {3, 8}, rng);
  EXPECT_EQ(RunOnCpu("fused_add_rmsnorm", in, {}).status.message(),
            "fused_add_rmsnorm: 'residual' dim 0 ('num_tokens'): expected 4, got 3");
  in = NormInputs("fused_add_rmsnorm", DType::kBFloat16, {2, 4, 8}, rng);
  st = RunOnCpu("fused_add_rmsnorm", in, {}).status;
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'x' has shape [2, 4, 8] (rank 3)"), std::string::npos)
      << st.message();

  in = NormInputs("layernorm", DType::kFloat32, {3, 16}, rng);
  in["beta"] = Random(DType::kFloat32, {17}, rng);
  EXPECT_EQ(RunOnCpu("layernorm", in, {}).status.message(),
            "layernorm: 'beta' dim 0 ('hidden_size'): expected 16, got 17");
  in.erase("gamma");
  EXPECT_EQ(RunOnCpu("layernorm", in, {}).status.message(), "layernorm: missing input 'gamma'");
}

TEST(Norms, EmptyRowsAreANoOp) {
  std::mt19937_64 rng(17);
  for (const std::string& op : NormOps()) {
    HostTensors in = NormInputs(op, DType::kFloat16, {0, 64}, rng);
    OpRun r = RunOnCpu(op, in, {});
    EXPECT_TRUE(r.status.ok()) << op << ": " << r.status.ToString();
  }
}

}  // namespace
}  // namespace kerneld::testing
