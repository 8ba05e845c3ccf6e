// gemm on the CPU against a float64 reference: dtypes x M (decode and
// beyond) x odd K / N x transpose_b x alpha, and the shape errors.
//
// Tolerance: the house rtol/atol per dtype, with atol scaled by sqrt(K): a
// float32 sum of K products of values in [-1, 1] carries a rounding error
// that grows like sqrt(K) (random-walk) even where the result is near zero
// and rtol gives no slack. The relative part covers the final rounding to
// the output dtype.
#include <gtest/gtest.h>

#include <cmath>

#include "op_runner.h"

namespace kerneld::testing {
namespace {

std::string CheckGemm(const HostTensors& in, const AttrMap& attrs, const HostTensors& got, DType dt,
                      int64_t k) {
  double rtol, atol;
  Tolerance(dt, &rtol, &atol);
  return CheckAgainstReference("gemm", in, attrs, got, rtol,
                               atol * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1))));
}

HostTensors GemmInputs(DType dt, int64_t m, int64_t n, int64_t k, bool tb, std::mt19937_64& rng) {
  return {{"a", Random(dt, {m, k}, rng, -1, 1)},
          {"b", Random(dt, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                               rng, -1, 1)}};
}

struct Dims {
  int64_t n, k;
};

class GemmTest : public ::testing::TestWithParam<std::tuple<DType, int64_t, Dims, bool, double>> {};

TEST_P(GemmTest, MatchesFloat64Reference) {
  auto [dtype, m, d, tb, alpha] = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(m * 1009 + d.n * 31 + d.k));
  HostTensors in = GemmInputs(dtype, m, d.n, d.k, tb, rng);
  AttrMap attrs = {{"transpose_b", tb}, {"alpha", alpha}};
  OpRun r = RunOnCpu("gemm", in, attrs);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.outputs["c"].dtype, dtype);
  EXPECT_EQ(r.outputs["c"].shape, (std::vector<int64_t>{m, d.n}));
  EXPECT_EQ(CheckGemm(in, attrs, r.outputs, dtype, d.k), "");
}

std::string GemmName(const ::testing::TestParamInfo<GemmTest::ParamType>& info) {
  const auto& [dt, m, d, tb, alpha] = info.param;
  return std::string(DTypeName(dt)) + "_m" + std::to_string(m) + "_n" + std::to_string(d.n) + "_k" +
         std::to_string(d.k) + (tb ? "_bT" : "_b") + (alpha == 1.0 ? "" : "_alpha");
}

INSTANTIATE_TEST_SUITE_P(Sweep, GemmTest,
                         ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16,
                                                              DType::kFloat32),
                                            ::testing::Values(int64_t{1}, int64_t{16}, int64_t{33}),
                                            ::testing::Values(Dims{1, 1}, Dims{127, 65},
                                                              Dims{129, 4097}, Dims{31, 1023}),
                                            ::testing::Bool(), ::testing::Values(1.0, -0.5)),
                         GemmName);

TEST(Gemm, LargeKAndN) {
  std::mt19937_64 rng(4);
  HostTensors in = GemmInputs(DType::kBFloat16, 5, 4097, 4097, true, rng);
  AttrMap attrs = {{"transpose_b", true}};
  OpRun r = RunOnCpu("gemm", in, attrs);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckGemm(in, attrs, r.outputs, DType::kBFloat16, 4097), "");
}

TEST(Gemm, MisalignedViews) {
  std::mt19937_64 rng(6);
  HostTensors in = GemmInputs(DType::kFloat16, 3, 33, 17, false, rng);
  OpRun r = RunOnCpu("gemm", in, {}, "", /*misalign=*/2);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(CheckGemm(in, {}, r.outputs, DType::kFloat16, 17), "");
}

TEST(Gemm, EmptyInnerDimensionGivesZeros) {
  HostTensors in = {{"a", {DType::kFloat32, {2, 0}, {}}}, {"b", {DType::kFloat32, {0, 3}, {}}}};
  OpRun r = RunOnCpu("gemm", in, {});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.outputs["c"].values, std::vector<double>(6, 0.0));
}

TEST(Gemm, ExactSmallProduct) {
  HostTensors in = {{"a", {DType::kFloat32, {2, 3}, {1, 2, 3, 4, 5, 6}}},
                    {"b", {DType::kFloat32, {3, 2}, {7, 8, 9, 10, 11, 12}}}};
  OpRun r = RunOnCpu("gemm", in, {{"alpha", 2.0}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["c"].values, (std::vector<double>{116, 128, 278, 308}));
  // The same b stored [N, K].
  in["b"] = {DType::kFloat32, {2, 3}, {7, 9, 11, 8, 10, 12}};
  r = RunOnCpu("gemm", in, {{"transpose_b", true}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.outputs["c"].values, (std::vector<double>{58, 64, 139, 154}));
}

TEST(Gemm, ShapeErrors) {
  std::mt19937_64 rng(8);
  auto expect = [&](const HostTensors& in, const AttrMap& a, const std::string& msg) {
    OpRun r = RunOnCpu("gemm", in, a);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status.message(), msg);
  };
  HostTensors in = GemmInputs(DType::kFloat32, 4, 8, 16, false, rng);
  in["b"] = Random(DType::kFloat32, {15, 8}, rng);
  expect(in, {}, "gemm: 'b' dim 0 ('K'): expected 16, got 15");
  in["b"] = Random(DType::kFloat32, {8, 15}, rng);
  expect(in, {{"transpose_b", true}},
         "gemm: 'b' dim 1 ('K'): expected 16, got 15 (transpose_b=true: b is [N, K])");
  in["b"] = Random(DType::kFloat32, {16}, rng);
  expect(in, {}, "gemm: 'b' has shape [16] (rank 1), expected [K, N] (rank 2)");
  in["b"] = Random(DType::kBFloat16, {16, 8}, rng);
  expect(in, {}, "gemm: 'b' dtype bfloat16 must equal 'a' dtype float32");
  in["b"] = Random(DType::kFloat32, {16, 8}, rng);
  in["a"] = Random(DType::kFloat32, {4, 4, 16}, rng);
  expect(in, {}, "gemm: 'a' has shape [4, 4, 16] (rank 3), expected [M, K] (rank 2)");
  in["a"] = Random(DType::kFloat32, {4, 16}, rng);
  expect(in, {{"transpose_b", 1.0}}, "gemm: attr 'transpose_b' must be bool, got float 1");
}

TEST(Gemm, StaticRankingCublasFirstDecodeKernelOnlyForSmallM) {
  // The static ranking, from measurement (docs/kernels.md): cublas over the
  // cuda decode kernel (eligible for M <= 32 only) over cpu.
  const OpDef* op = OpRegistry::Global().Find("gemm");
  ASSERT_NE(op, nullptr);
  ASSERT_NE(op->FindImpl("cpu"), nullptr);
  if (!KERNELD_CUDA_BUILT) return;  // no cuda or cublas gemm to rank
  const ImplDef* decode = op->FindImpl("cuda");
  const ImplDef* cublas = op->FindImpl("cublas");
  ASSERT_NE(decode, nullptr);
  ASSERT_NE(cublas, nullptr);
  EXPECT_GT(cublas->priority, decode->priority);
  EXPECT_GT(decode->priority, op->FindImpl("cpu")->priority);
  KernelContext ctx;
  ctx.op = op;
  TensorView a;
  a.dtype = DType::kBFloat16;
  a.shape = {32, 64};
  ctx.inputs = {a, a};
  EXPECT_EQ(decode->requires_.RejectRequest(ctx), std::nullopt);
  ctx.inputs[0].shape = {33, 64};
  EXPECT_EQ(decode->requires_.RejectRequest(ctx).value_or(""),
            "M = 33 > 32 (the decode kernel is for small M)");
  EXPECT_EQ(cublas->requires_.RejectRequest(ctx), std::nullopt);
}

TEST(Gemm, DecodeKernelRanksFirstOnlyWhereMeasuredFaster) {
  // float32, b [K, N], 8 <= M <= 16, 4096 <= N <= 6144, K <= 4096: the
  // decode kernel outranks cuBLASLt (kernels/ops/gemm/cuda.cu); anywhere else
  // (other dtype, transpose_b, M, N or K out of range) cuBLASLt stays first.
  if (!KERNELD_CUDA_BUILT) GTEST_SKIP() << "built without the CUDA backend: no cuda or cublas gemm to rank";
  const OpDef* op = OpRegistry::Global().Find("gemm");
  ASSERT_NE(op, nullptr);
  const ImplDef* decode = op->FindImpl("cuda");
  const ImplDef* cublas = op->FindImpl("cublas");
  ASSERT_NE(decode, nullptr);
  ASSERT_NE(cublas, nullptr);
  EXPECT_NE(decode->priority_doc, "");
  auto decode_first = [&](DType dt, int64_t m, int64_t n, int64_t k, bool tb) {
    KernelContext ctx;
    ctx.op = op;
    TensorView a, b;
    a.dtype = b.dtype = dt;
    a.shape = {m, k};
    b.shape = tb ? Shape{n, k} : Shape{k, n};
    ctx.inputs = {a, b};
    ctx.attrs = {{"transpose_b", tb}, {"alpha", 1.0}};
    return decode->PriorityFor(ctx) > cublas->PriorityFor(ctx);
  };
  EXPECT_TRUE(decode_first(DType::kFloat32, 16, 4096, 4096, false));
  EXPECT_TRUE(decode_first(DType::kFloat32, 8, 6144, 4096, false));
  EXPECT_TRUE(decode_first(DType::kFloat32, 12, 4096, 1024, false));
  EXPECT_FALSE(decode_first(DType::kFloat32, 16, 4096, 4096, true));    // b [N, K]
  EXPECT_FALSE(decode_first(DType::kBFloat16, 16, 4096, 4096, false));  // half type
  EXPECT_FALSE(decode_first(DType::kFloat16, 16, 4096, 4096, false));
  EXPECT_FALSE(decode_first(DType::kFloat32, 1, 4096, 4096, false));  // M out of range
  EXPECT_FALSE(decode_first(DType::kFloat32, 32, 4096, 4096, false));
  EXPECT_FALSE(decode_first(DType::kFloat32, 16, 14336, 4096, false));  // N out of range
  EXPECT_FALSE(decode_first(DType::kFloat32, 16, 2048, 2048, false));
  EXPECT_FALSE(decode_first(DType::kFloat32, 16, 4096, 14336, false));  // K out of range
}

}  // namespace
}  // namespace kerneld::testing
