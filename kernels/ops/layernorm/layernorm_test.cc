// layernorm on the CPU against the float64 reference: dtypes x rows x
// hidden sizes with tails, in place and not, random data, poisoned outputs;
// misaligned views, leading dims, constant and offset rows, and the
// schema's error messages.
#include <gtest/gtest.h>

#include "norm_cases.h"

namespace kerneld::testing {
namespace {

class NormTest : public ::testing::TestWithParam<NormParam> {};

TEST_P(NormTest, MatchesFloat64Reference) { ExpectNormMatchesReference(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Sweep, NormTest, NormSweep("layernorm", ::testing::Bool()), NormName);

TEST(LayerNorm, LeadingDimsAndMisalignedViews) {
  std::mt19937_64 rng(12);
  ExpectNormLeadingDimsAndMisalignedViews("layernorm", rng);
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

TEST(LayerNorm, ErrorMessages) {
  std::mt19937_64 rng(16);
  HostTensors in = NormInputs("layernorm", DType::kFloat32, {3, 16}, rng);
  in["beta"] = Random(DType::kFloat32, {17}, rng);
  EXPECT_EQ(RunOnCpu("layernorm", in, {}).status.message(),
            "layernorm: 'beta' dim 0 ('hidden_size'): expected 16, got 17");
  in.erase("gamma");
  EXPECT_EQ(RunOnCpu("layernorm", in, {}).status.message(), "layernorm: missing input 'gamma'");
}

TEST(LayerNorm, EmptyRowsAreANoOp) { ExpectNormEmptyRowsAreANoOp("layernorm"); }

}  // namespace
}  // namespace kerneld::testing
